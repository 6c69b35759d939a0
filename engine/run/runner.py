"""A run from start to finish: set-up, seed evaluation, the orchestrated pipeline, summary.

Front ends (headless CLI, TUI, bench) create an EngineRun, observe its bus and snapshots, call
its control methods, and await run(). Nothing here prints.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from engine import events as ev
from engine.config import ConfigError, RunConfig, build_config, new_run_layers
from engine.context import EXIT_IO, FatalRunError, RunContext
from engine.evaluator import EXIT_EVALUATOR_LOST
from engine.events import EventBus
from engine.items import WorkItem
from engine.llm.redact import REDACTED, has_credentials, redact_mapping
from engine.capabilities.program_speculation import speculation_refusal_for
from engine.capabilities.speculation import adopt_speculative
from engine.pipeline.deadline import DEADLINE_REASON
from engine.pipeline.orchestrator import Orchestrator
from engine.config.strategy import upgrade_stored_strategy
from engine.run.setup import (SetupError, build_context, check_combination, check_stage_names, open_store,
                              restore_stored_run)
from engine.run.state import restore_part_states, strategy_parts
from engine.run.summary import run_summary
from engine.run.snapshot import EngineSnapshot, build_snapshot
from engine.steering import live as steering
from engine.run.lease import keep_lease, mark_interrupted, release_quietly, remove_db_files
from engine.store.lease import Lease
from engine.store.store import StoreError
from engine.stages.kinds import build_handlers, strategy_for
from engine.tasks.loader import load_any_task, with_program_settings
from engine.tasks.prompt_task import TaskError
from engine.tracking.session import TrackingSession

# SetupError lives with the set-up code; front ends import it from here, next to EngineRun.
__all__ = ["EngineRun", "RunResult", "SetupError", "new_run_id"]


@dataclass(frozen=True)
class RunResult:
    status: str
    reason: str
    summary: dict
    exit_code: int


def new_run_id() -> str:
    return time.strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(2)


class EngineRun:
    def __init__(self, ctx: RunContext, db_path: Path, sim_state, resumed: bool, backlog: list[WorkItem]) -> None:
        self.ctx = ctx
        self.db_path = db_path
        self.sim_state = sim_state
        self.resumed = resumed
        self.backlog = backlog
        self.strategy = strategy_for(ctx)
        self.orchestrator = Orchestrator(ctx, build_handlers(ctx, self.strategy))
        adopt_speculative(ctx.pool, backlog)
        ctx.call_sink.target = self.orchestrator.recorder.llm_call
        ctx.store.on_error = self._on_store_error
        if ctx.local_server is not None:  # a dead managed server stops the run (resumable)
            ctx.local_server.watch(self.stop)
        self.pipeline_s = 0.0
        self._seed_scoring: asyncio.Future | None = None
        self.lease: Lease | None = None
        self.warnings: list[str] = []
        """Problems found after the event bus closed, for the front end to show."""

    async def _take_lease(self) -> None:
        try:
            self.lease = await self.ctx.store.acquire_lease(self.ctx.run_id)
        except StoreError as exc:
            await self.close()
            raise SetupError(str(exc)) from None

    # -- construction ---------------------------------------------------------------------
    @classmethod
    async def create(cls, task_ref: str, layers: list[tuple[str, dict]], db_path: Path) -> "EngineRun":
        try:
            task = load_any_task(task_ref)
            config = build_config(new_run_layers(task, layers))
            task = with_program_settings(task, config.program)
        except (TaskError, ConfigError) as exc:
            raise SetupError(str(exc)) from None
        return await cls.start_new(config, task, db_path, str(task.path))

    @classmethod
    async def create_from_task(cls, task, layers: list[tuple[str, dict]], db_path: Path) -> "EngineRun":
        """A new run of a task object built in memory (the adapter kind, evotui/library/api.py) rather
        than loaded from a folder; the runs table records `task.path` as its task path."""
        try:
            config = build_config(new_run_layers(task, layers))
        except ConfigError as exc:
            raise SetupError(str(exc)) from None
        return await cls.start_new(config, task, db_path, str(task.path))

    @classmethod
    async def start_new(cls, config: RunConfig, task, db_path: Path, task_path: str,
                     seed_meta: dict | None = None) -> "EngineRun":
        """A new run of `task` under `config` (loaded and configured: create, create_from_task, and
        engine/run/admin.py start_branch): services, handlers, the run's row and its lease. A run
        that never started leaves no empty database file behind."""
        check_combination(config, task)
        created_file = not Path(db_path).expanduser().exists()
        store = await open_store(db_path, create=True)
        run_id = new_run_id()
        try:
            ctx, sim_state = await build_context(run_id, config, task, store)
            run = await cls._construct(ctx, db_path, sim_state, resumed=False, backlog=[])
        except SetupError:
            if created_file:
                remove_db_files(Path(db_path).expanduser())
            raise
        ctx.ledger.seed_meta = dict(seed_meta or {})
        # Credentials inside endpoint URLs never reach the database; a resume asks for the URL again.
        store.insert_run(run_id, task=task.name, task_path=task_path,
                         config_json=redact_mapping(config.model_dump(mode="json")), seed=config.seed,
                         mode=config.pipeline.mode, policy=config.pipeline.policy, backend=ctx.backend,
                         status="running", created_at=time.time())
        await store.flush()
        await run._take_lease()
        return run

    @classmethod
    async def resume(cls, db_path: Path, run_id: str | None, budget_overrides: dict,
                     overrides: dict | None = None) -> "EngineRun":
        """overrides: further config entries the user typed (e.g. endpoint URLs whose credentials
        were not stored)."""
        store = await open_store(db_path, create=False)
        run_id = run_id or await store.latest_run_id()
        # Only the run's own row before the lease: the rest is loaded once, under the lease.
        rows = await store.fetch_rows("runs", run_id) if run_id else []
        if not rows:
            await store.close()
            if run_id is None:  # e.g. `evotui run` was killed before it wrote its run row: nothing was spent
                raise SetupError(f"{db_path} holds no run to resume (a run stopped before it started leaves none); "
                                 f"start one with `evotui run TASK --db {db_path}`")
            raise SetupError(f"no run {run_id!r} in {db_path}; list runs with `evotui runs --db {db_path}`")
        try:
            task = load_any_task(rows[0]["task_path"])
            stored = dict(rows[0]["config"])
            stored["strategy"] = upgrade_stored_strategy(stored.get("strategy") or {})
            config = build_config([("stored run config", stored),
                                   ("command line", {**(overrides or {}), "budget": budget_overrides})])
            task = with_program_settings(task, config.program)
        except (TaskError, ConfigError) as exc:
            await store.close()
            raise SetupError(f"cannot resume {run_id}: {exc}") from None
        try:
            check_combination(config, task)
        except SetupError as exc:
            await store.close()
            raise SetupError(f"cannot resume {run_id}: {exc}") from None
        hidden = [flag for flag, ep in (("--llm-url", config.task_llm), ("--reflection-url", config.reflection_llm))
                  if ep is not None and REDACTED in ep.url and has_credentials(ep.url)]
        if hidden:
            await store.close()
            raise SetupError(f"run {run_id} was started with credentials in its endpoint URL, which are never "
                             f"stored; resume with {' URL and '.join(hidden)} URL, or use --api-key-env")
        try:
            held = await store.acquire_lease(run_id)
        except StoreError as exc:  # LeaseHeld included: the message names the live driver
            await store.close()
            raise SetupError(str(exc)) from None
        try:
            ctx, sim_state = await build_context(run_id, config, task, store)
        except SetupError:
            await release_quietly(store, held)
            raise
        backlog = restore_stored_run(ctx, await store.load_run(run_id))
        await steering.load(ctx)  # the operator's guidance, pins and bans carry on
        try:
            run = await cls._construct(ctx, db_path, sim_state, resumed=True, backlog=backlog)
        except SetupError:
            await release_quietly(store, held)
            raise
        store.update_run(run_id, status="running", updated_at=time.time())
        await store.flush()
        run.lease = held
        return run

    @classmethod
    async def _construct(cls, ctx: RunContext, db_path: Path, sim_state, resumed: bool,
                         backlog: list[WorkItem]) -> "EngineRun":
        """The run object (handlers, pipeline). If that fails, the context's clients, server and
        store close before the error goes on, so the process can exit (a live writer thread would
        keep it waiting); a ValueError is a setup problem whose message says what to change."""
        try:
            run = cls(ctx, db_path, sim_state, resumed=resumed, backlog=backlog)
            try:
                ctx.setup_warnings.extend(check_stage_names(ctx.config, run.orchestrator.spec, ctx.task.kind,
                                                            run.strategy.name, resumed))
            except ValueError:
                await run.orchestrator.handlers.aclose()  # a program task's evaluator service
                raise
            # The strategy's own state (a round-robin turn) is saved with the run's and comes back here.
            ctx.state_parts = strategy_parts(run.strategy)
            restore_part_states(ctx.state_parts, ctx.state.strategy)
            return run
        except BaseException as exc:
            for client in {id(c): c for c in (ctx.task_llm, ctx.reflection_llm)}.values():
                await client.aclose()
            if ctx.local_server is not None:
                ctx.local_server.stop()
            await ctx.store.close()
            if isinstance(exc, ValueError):
                raise SetupError(str(exc)) from None
            raise

    # -- observation and control ----------------------------------------------------------
    @property
    def bus(self) -> EventBus:
        return self.ctx.bus

    def snapshot(self) -> EngineSnapshot:
        return build_snapshot(self.orchestrator)

    def pause(self) -> None:
        self.orchestrator.pause()

    def resume_work(self) -> None:
        self.orchestrator.resume()

    def drain(self, reason: str = "drain requested") -> None:
        self.orchestrator.drain(reason)

    def stop(self, reason: str = "stopped") -> None:
        self.orchestrator.stop(reason)
        if self._seed_scoring is not None:
            # The seed is scored before the orchestrator runs: a slow seed evaluation is killed
            # now (the sandbox's grace), not awaited, so a second Ctrl+C / SIGTERM ends the run.
            self._seed_scoring.cancel()

    def set_workers(self, stage: str, n: int) -> int:
        """Resize a stage's worker set (within its bounds); returns the new target."""
        return self.orchestrator.set_workers(stage, n)

    def set_policy(self, name: str, max_gap: int | None = None) -> None:
        self.orchestrator.set_policy(name, max_gap)

    def set_speculation(self, on: bool) -> None:
        """Speculative evaluation on/off; applies to validations that start from now on."""
        why = speculation_refusal_for(self.ctx.config, self.ctx.task) if on else ""
        if why:
            raise ValueError(why)
        self.ctx.config.pipeline.speculation = on

    @property
    def review(self):
        """The review gates: pending(), decide(item_id, decision, reason, edited_text),
        approve_all(), set_enabled(gate, on), enabled."""
        return self.orchestrator.review

    # -- the run --------------------------------------------------------------------------
    async def run(self) -> RunResult:
        ctx = self.ctx
        tracking = TrackingSession.open(self)  # None without [tracking]; an observer off the hot path
        ctx.bus.publish(
            ev.RunStarted(run_id=ctx.run_id, task=ctx.task.name, mode=ctx.config.pipeline.mode,
                          policy=ctx.policy.name, backend=ctx.backend, resumed=self.resumed,
                          strategy=self.strategy.name)
        )
        status, reason, exit_code = "completed", "", 0
        heartbeat = asyncio.create_task(keep_lease(self), name="lease-heartbeat")
        try:
            if not ctx.seed_id and not await self._evaluate_seed_by_deadline():
                status, reason = "completed", DEADLINE_REASON
            else:
                t0 = time.monotonic()
                status = await self.orchestrator.run(self.backlog)
                self.pipeline_s = time.monotonic() - t0
                reason = self.orchestrator.stop_reason
            if self.orchestrator.fatal is not None:
                exit_code = self.orchestrator.fatal.exit_code
        except FatalRunError as exc:
            status, reason, exit_code = "failed", str(exc), exc.exit_code
        except StoreError as exc:
            status, reason, exit_code = "interrupted", self._store_failure(exc), EXIT_IO
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            # The database or the evaluation cluster failed, not the run: it resumes once they are back.
            if exit_code in (EXIT_IO, EXIT_EVALUATOR_LOST):
                status = "interrupted"
            summary = self.summary(status, reason)
            self._tell_deadline_cancellations()
            ctx.store.update_run(ctx.run_id, status=status, summary_json=json.dumps(summary), updated_at=time.time())
            self.orchestrator.recorder.save_run_state()
            ctx.bus.publish(ev.RunFinished(run_id=ctx.run_id, status=status, reason=reason))
            try:
                await self.close()
            except StoreError as exc:
                if exit_code != EXIT_IO:
                    status, reason, exit_code = "interrupted", self._store_failure(exc), EXIT_IO
                    summary = {**summary, "status": status, "stop_reason": reason}
                await mark_interrupted(self.db_path, ctx.run_id, self.warnings)
            if tracking is not None:  # after close: the export reads what the database holds
                self.warnings += await tracking.finish(self, summary, status)
                summary = {**summary, "tracking": tracking.report()}
        if status == "interrupted" and exit_code == 0:
            exit_code = 130
        return RunResult(status=status, reason=reason, summary=summary, exit_code=exit_code)

    def _store_failure(self, exc: Exception) -> str:
        return (f"cannot write the database {self.db_path} ({exc}); free disk space (or fix the I/O "
                f"problem), then `evotui resume {self.ctx.run_id} --db {self.db_path}`")

    def _on_store_error(self, exc: StoreError) -> None:
        """Writer callback: once the writer has stopped for good nothing more is saved, so the
        run stops at once (resumable) instead of working on into the void."""
        if self.ctx.store.failed:
            self.orchestrator.fail(FatalRunError(self._store_failure(exc), exit_code=EXIT_IO))

    async def close(self) -> None:
        ctx = self.ctx
        await self.orchestrator.handlers.aclose()
        clients = {id(c): c for c in (ctx.task_llm, ctx.reflection_llm)}
        for client in clients.values():
            await client.aclose()
        if ctx.local_server is not None:
            ctx.local_server.stop()
        try:
            await ctx.store.close()
        finally:
            if self.lease is not None:
                problem = await release_quietly(ctx.store, self.lease)
                if problem:
                    self.warnings.append(problem)
                self.lease = None
            ctx.bus.close()

    async def _evaluate_seed_by_deadline(self) -> bool:
        """The seed's evaluation, cut at the end of the deadline's grace (False: cut; a resume
        evaluates the seed again). Only the scoring is cut: a scored seed is always saved."""
        deadline = self.orchestrator.deadline_for()
        scoring = self._seed_scoring = asyncio.ensure_future(self.orchestrator.handlers.evaluate_seed())
        try:
            if deadline is None:
                await scoring
            elif not (await deadline.within(scoring, {"item_id": "seed", "stage": "evaluate"}))[0]:
                return False
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling() or not scoring.cancelled():
                raise  # this task itself is being cancelled
            # stop() cancelled the scoring: the orchestrator, already stopped, ends the run
            # as interrupted and a resume scores the seed again.
        finally:
            self._seed_scoring = None
        self.orchestrator.recorder.save_run_state()
        await self.ctx.store.flush()
        return True

    def _tell_deadline_cancellations(self) -> None:
        """Work the deadline cancelled, on stderr (front ends show run.warnings) and in the event log."""
        deadline = self.orchestrator.deadline
        if deadline is None or not deadline.report.cancelled:
            return
        r = deadline.report
        names = ", ".join(f"{c['item_id']} ({c['stage']})" for c in r.cancelled[:8])
        more = f" and {len(r.cancelled) - 8} more" if len(r.cancelled) > 8 else ""
        message = (f"the --max-wall deadline ({r.limit_s:g} s) cancelled {len(r.cancelled)} unfinished "
                   f"work item(s) after its {r.grace_s:g} s grace: {names}{more}; they stay open and "
                   f"`evotui resume {self.ctx.run_id} --max-wall SECONDS` (a larger limit) redoes them")
        self.warnings.append(message)
        self.ctx.bus.publish(ev.Notice(level="warning", message=message))

    def summary(self, status: str, reason: str) -> dict:
        deadline = self.orchestrator.deadline
        return {**run_summary(self, status, reason),
                "deadline": deadline.report.figures() if deadline is not None else None}
