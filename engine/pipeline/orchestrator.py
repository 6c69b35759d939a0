"""The orchestrator: admission (the select stage) and the stage chain, in async or sync mode.

async: select keeps admitting items while budget and queue room allow; every stage streams.
sync:  GEPA semantics: the next item is admitted only when the previous one has left the
       pipeline, so each step runs its stages one after another, each waiting for all of its
       requests. Both modes use the same Stage and handler code.
Control: pause (no stage takes new items; running handlers finish, outputs are held), resume,
drain (admit nothing more, finish what is in flight, then stop), stop (cancel now; interrupted
items stay open in SQLite and are re-enqueued by a resume). A max_wall_s budget is a deadline
(engine/pipeline/deadline.py): it drains, then stops what outlives its grace.
"""

from __future__ import annotations

import asyncio
import time

from engine import events as ev
from engine.costs.budget import Reservation
from engine.context import EXIT_NO_PROGRESS, FatalRunError, RunContext
from engine.items import ChainLink, Rollout, WorkItem
from engine.pipeline.control import AdaptiveController
from engine.pipeline.deadline import DeadlineClock, DeadlineStops, WallDeadline
from engine.pipeline.lockstep import LockstepAdmission
from engine.pipeline.merge_admission import MergeAdmission
from engine.pipeline.modes import mode_named
from engine.pipeline.recorder import Recorder
from engine.pipeline.review import GATES, ReviewGates
from engine.pipeline.spec import SearchHandlers, Selection
from engine.pipeline.stage import Stage
from engine.staleness import make_policy


class Orchestrator(LockstepAdmission, DeadlineStops):
    def __init__(self, ctx: RunContext, handlers: SearchHandlers) -> None:
        self.ctx = ctx
        self.mode = mode_named(ctx.config.pipeline.mode)
        self.running = asyncio.Event()
        self.running.set()
        self.state = "idle"
        self.stop_reason = ""
        self.fatal: FatalRunError | None = None
        self._draining = False
        self._changed = asyncio.Event()
        self._stopped = asyncio.Event()
        self.handlers = handlers
        self.spec = spec = handlers.pipeline()
        self.recorder = Recorder(ctx, spec.checked, spec.reflect_to, on_item_end=self._item_ended, on_fatal=self.fail)
        handlers.bind(self.recorder, self._spawn, self._changed.set)
        cfg = ctx.config.pipeline
        self.stages: dict[str, Stage] = {}
        for st in spec.stages:
            self.stages[st.name] = self._stage(st.name, st.run, self._workers(st.name, st.workers))
        for up, down in zip(spec.names, spec.names[1:]):
            self.stages[up].downstream = self.stages[down]
        if spec.reflect is not None:
            # Stale proposals detour through reflect, then rejoin where they were checked.
            reflect = self._stage("reflect", spec.reflect.run,
                                  cfg.workers.get("reflect", 4) if self.mode.configured_workers else 1)
            reflect.downstream = self.stages[spec.reflect_to]
            self.stages["reflect"] = reflect
        self.recorder.reroute = self._reroute
        self.recorder.abandon = handlers.abandoned
        self.review = ReviewGates(ctx, self.stages, self.recorder.item_finished_at_gate)
        for gate in GATES:
            if gate in self.stages:
                self.stages[gate].handler = self.review.wrap(gate, self.stages[gate].handler)
        self.admitted = 0
        self.merges = MergeAdmission(ctx, self.handlers, self.recorder.in_flight, spec.merge_at)
        self.controller: AdaptiveController | None = None
        self._aux_tasks: set[asyncio.Task] = set()
        self._control_tasks: list[asyncio.Task] = []
        self.stalled = 0
        """Items in a row that ended without a candidate (see BudgetConfig.max_stalled)."""
        self.clock = DeadlineClock(ctx.elapsed)
        """The deadline's clock (tests replace it before run())."""
        self.deadline: WallDeadline | None = None
        """The max_wall_s deadline of this session, made by deadline_for() (None: no wall limit)."""
        self._deadline_stopped = False

    def _workers(self, name: str, default: int) -> int:
        cfg = self.ctx.config.pipeline
        if self.mode.chains:
            # Heads waiting for a validation slot hold an evaluate worker until they are
            # validated or superseded; proposals must never queue behind them.
            return self.handlers.chain_workers.get(name) or {"evaluate": 4 * cfg.chains + cfg.chain_validators, "update": 1}.get(name, cfg.chains)
        # sync and pxn drive items step by step; their workers only serve review re-entries.
        return cfg.workers.get(name, default) if self.mode.configured_workers else 1

    def _stage(self, name: str, run, workers: int) -> Stage:
        cfg = self.ctx.config.pipeline
        lo, hi = cfg.min_workers.get(name, 1), cfg.max_workers.get(name, 64)
        return Stage(name, run, capacity=cfg.queue_capacity, workers=max(lo, min(workers, max(hi, workers))),
                     hooks=self.recorder, running=self.running, min_workers=lo, max_workers=max(hi, workers),
                     gate=self.persisted)

    # -- control --------------------------------------------------------------------------
    def pause(self) -> None:
        if self.state in ("running", "idle"):
            self.running.clear()
            self._set_state("paused")

    def resume(self) -> None:
        if self.state == "paused":
            self.running.set()
            self._set_state("draining" if self._draining else "running")
            self._changed.set()

    def drain(self, reason: str = "drain requested") -> None:
        if not self._draining:
            self._draining = True
            self.stop_reason = self.stop_reason or reason
            self.running.set()
            self._set_state("draining")
            self._changed.set()

    def stop(self, reason: str = "stopped") -> None:
        """Stop now: every worker and the admission are cancelled before anything else runs,
        so no new request starts and nothing more is committed."""
        self.stop_reason = self.stop_reason or reason
        self._stopped.set()
        self._changed.set()
        for stage in self.stages.values():
            stage.cancel()
        for task in self._control_tasks:
            task.cancel()

    def _set_state(self, state: str) -> None:
        self.state = state
        self.ctx.bus.publish(ev.StateChanged(state=state))

    def fail(self, exc: FatalRunError) -> None:
        """End the run now with exc's message and exit code (the first failure wins)."""
        if self.fatal is None:
            self.fatal = exc
        self.stop(f"fatal: {exc}")

    def _reroute(self, item: WorkItem, stage: str) -> None:
        task = asyncio.create_task(self.stages[stage].put(item), name=f"to-{stage}-{item.item_id}")
        self._aux_tasks.add(task)
        task.add_done_callback(self._aux_tasks.discard)

    def _item_ended(self, item: WorkItem) -> None:
        self._changed.set()
        if item.outcome != "accepted":
            self.handlers.ended(item)
        if item.is_merge:
            return
        outcome = item.outcome
        if outcome not in ("skipped", "failed"):
            self.stalled = 0
            return
        self.stalled += 1
        limit = self.ctx.config.budget.max_stalled
        if limit is not None and self.stalled >= limit and self.fatal is None:
            t = self.ctx.tally
            self.fail(FatalRunError(
                f"no progress: {self.stalled} items in a row ended without a candidate (last: "
                f"{item.why(outcome)}; in the whole run {t.skipped} were skipped because the "
                f"parent already scores the maximum on its minibatch and {t.failed} failed); check the metric "
                "and the proposer, or raise budget.max_stalled", exit_code=EXIT_NO_PROGRESS))

    async def persisted(self) -> None:
        """Backpressure: while the database is behind by more than [store] allows, no worker
        takes an item and nothing is admitted, so a kill -9 loses at most about that much."""
        store, lim = self.ctx.store, self.ctx.config.store
        if store.pending_writes > lim.max_unsaved_rows or store.lag_s > lim.max_unsaved_s:
            await store.catch_up()

    def set_workers(self, stage: str, n: int, reason: str = "user") -> int:
        if stage not in self.stages:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(self.stages)}")
        st = self.stages[stage]
        old = st.target_workers
        new = st.resize(n)
        if new != old:
            self.ctx.bus.publish(ev.WorkerReallocated(stage=stage, old=old, new=new, reason=reason))
        return new

    def set_policy(self, name: str, max_gap: int | None = None) -> None:
        if not self.mode.staleness_policies and name != "full":
            raise ValueError(f"mode {self.mode.name} rebases stale heads itself; staleness policies apply to mode "
                             "async")
        gap = self.ctx.config.pipeline.gap_for(name) if max_gap is None else max_gap
        self.ctx.policy = make_policy(name, gap)
        self.ctx.bus.publish(ev.PolicyChanged(policy=name, max_gap=gap))

    @property
    def in_flight(self) -> int:
        return len(self.recorder.in_flight)

    # -- admission ------------------------------------------------------------------------
    def select(self, selection: Selection | None = None) -> WorkItem:
        ctx = self.ctx
        chosen = selection or self.handlers.select()
        item = WorkItem(
            item_id=ctx.next_item_id(),
            created_version=ctx.pool.version,
            parent_id=chosen.parent_id,
            minibatch=chosen.minibatch,
            stage=self.spec.first,
            created_at=time.time(),
            tags=dict(chosen.tags),
        )
        self.handlers.admitted(item)
        return item

    def _register(self, item: WorkItem, reservation: Reservation) -> WorkItem:
        """Every new item, however admitted: announced, its budget reservation kept, persisted."""
        ctx = self.ctx
        ctx.bus.publish(ev.CandidateSelected(item_id=item.item_id, parent_id=item.parent_id, minibatch=item.minibatch,
                                             pool_version=ctx.pool.version))
        ctx.reservations[item.item_id] = reservation
        self.recorder.item_created(item)
        self.admitted += 1
        return item

    def _spawn(self, parent_id: str, minibatch: list[str], stage: str, chain: ChainLink | None = None,
               rollout: Rollout | None = None) -> WorkItem | None:
        """An item a handler starts mid-pipeline (mode chain: the next step of a chain), with
        its own budget reservation; None while draining or when the budget has no room."""
        ctx = self.ctx
        if self._draining or self._stopped.is_set() or (chain is not None and self._chain_retires(chain)):
            return None
        reservation = ctx.budget.try_reserve(self.handlers.estimate(), ctx.elapsed())
        if reservation is None:
            return None
        item = self._register(WorkItem(item_id=ctx.next_item_id(), created_version=ctx.pool.version,
                                       parent_id=parent_id, minibatch=minibatch, stage=stage, created_at=time.time(),
                                       chain=chain, rollout=rollout), reservation)
        self._reroute(item, stage)
        self._changed.set()  # the chain count may have grown at this step: admission looks again
        return item

    async def _wait_until(self, predicate) -> None:
        while not predicate():
            self._changed.clear()
            await self._changed.wait()

    async def _admit(self) -> None:
        cfg, mode = self.ctx.config.pipeline, self.mode
        if mode.lockstep:
            await self._admit_steps(cfg.pxn_parents, cfg.pxn_mutations)
            return
        # sync admits the next step only when the previous one has left the pipeline; a merge
        # is a step there. async: merges use their own slots, beside max_in_flight proposals.
        sync = mode.one_at_a_time
        limit = 1 if sync else cfg.max_in_flight
        first = self.stages[self.spec.first]

        def merge_room() -> bool:
            if not mode.merges:
                return False
            return (self.in_flight == 0 if sync else self.merges.running < cfg.merge_slots) and self.merges.owed()

        if mode.chains:  # a resumed run keeps its count, within the bounds configured now
            self.ctx.chain.count = self.ctx.chain.bounded(cfg.chain_floor, cfg.chains)

        def proposal_room() -> bool:
            return (self.in_flight if sync else self.proposing) < (self.ctx.chain.count if mode.chains else limit)

        while not self._draining:
            await self._wait_until(lambda: (self.running.is_set() and (proposal_room() or merge_room()))
                                   or self._draining or self._stopped.is_set())
            if self._stopped.is_set():
                break
            if self._draining:
                break
            await self.persisted()
            item = self._admit_merge() if merge_room() else None
            if item is None:
                if not proposal_room():
                    continue  # the merge search came up empty; wait for the pool to change
                item = await self._admit_one()
            if item is None:
                break
            await (first if item.stage == first.name else self.stages[item.stage]).put(item)

    def _chain_retires(self, link: ChainLink) -> bool:
        """A chain ends instead of taking its next step when the others fill the chain count
        (it dropped after a collision); admission starts a chain again once it grows."""
        handing = self.recorder.in_flight.get(link.chain_of)
        others = self.proposing - (1 if handing is not None and handing.holds_proposal_slot else 0)
        if others < self.ctx.chain.count:
            return False
        self.ctx.staleness_counts["chain_retired"] += 1
        return True

    @property
    def proposing(self) -> int:
        """Items in flight that still hold a proposal slot: not merges, not chain heads that
        passed their gate and only await validation."""
        return sum(1 for item in self.recorder.in_flight.values() if item.holds_proposal_slot)

    async def _admit_one(self, selection: Selection | None = None, wait: bool = True) -> WorkItem | None:
        """Reserve budget and create one item. None when the budget has no room: with items in
        flight it waits for their unused reservations (or, with wait=False, returns at once);
        with nothing in flight the budget is used up and the run drains."""
        ctx = self.ctx
        while True:
            reservation = ctx.budget.try_reserve(self.handlers.estimate(), ctx.elapsed())
            if reservation is not None:
                break
            if self.in_flight and not wait:
                return None
            if self.in_flight and ctx.budget.exhausted != "wall_s":
                # In-flight items may hand back unused reservations: retry when one ends.
                self._changed.clear()
                await self._changed.wait()
                if self._draining:
                    return None
                continue
            self._publish_budget()
            self.drain(f"budget exhausted: {ctx.budget.exhausted}")
            return None
        return self._register(self.select(selection), reservation)

    def _admit_merge(self) -> WorkItem | None:
        admitted = self.merges.admit()
        return self._register(*admitted) if admitted is not None else None

    def _publish_budget(self) -> None:
        ctx = self.ctx
        ctx.bus.publish(
            ev.BudgetUpdated(spent=ctx.budget.counters(ctx.elapsed()), limits=ctx.budget.limits_dict(), exhausted=ctx.budget.exhausted)
        )

    # -- run ------------------------------------------------------------------------------
    async def run(self, backlog: list[WorkItem]) -> str:
        """Run until drained or stopped; returns the final status (completed/interrupted/failed)."""
        ctx = self.ctx
        if self._stopped.is_set():
            return "failed" if self.fatal is not None else "interrupted"
        if self.state != "paused":
            self._set_state("draining" if self._draining else "running")
        for stage in self.stages.values():
            stage.start()
        for item in backlog:
            # Interrupted work from an earlier session: reserve its cost without an admission test.
            ctx.reservations[item.item_id] = ctx.budget.reserve_unchecked(self.handlers.estimate())
            self.recorder.in_flight[item.item_id] = item
        refill = asyncio.create_task(self._refill(backlog), name="resume-backlog")
        admit = asyncio.create_task(self._admit(), name="select")
        admit.add_done_callback(self._admission_done)
        self._control_tasks = [refill, admit]
        watcher = asyncio.create_task(self._wait_until(lambda: self._stopped.is_set() or (
            self._draining and self.in_flight == self.review.pending_count and admit.done())), name="drain-watch")
        ticker = asyncio.create_task(self._tick(), name="tick")
        background = [ticker]
        deadline = self.deadline_for()
        if deadline is not None:
            background.append(asyncio.create_task(
                deadline.run(self._deadline_reached, self._deadline_grace_over), name="wall-deadline"))
        cfg = ctx.config.pipeline
        if cfg.adaptive and self.mode.adaptive:
            self.controller = AdaptiveController(self.stages, cfg.control_interval_s, self.set_workers,
                                                 controlled=self.spec.scalable)
            background.append(asyncio.create_task(self.controller.run(), name="adaptive-control"))
        try:
            await watcher
        finally:
            for task in (admit, refill, *background):
                task.cancel()
            await asyncio.gather(admit, refill, *background, return_exceptions=True)
            for stage in self.stages.values():
                await stage.stop()
        if self.fatal is not None:
            return "failed"
        if self._stopped.is_set() and not self._deadline_stopped:
            return "interrupted"
        return "completed" if self.stop_reason.startswith("budget") else "interrupted"

    def _admission_done(self, task: asyncio.Task) -> None:
        self._changed.set()
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        # A bug in admission must end the run loudly, not leave it waiting for items forever.
        self.fail(exc if isinstance(exc, FatalRunError) else FatalRunError(f"internal error in admission: {exc!r}"))

    async def _refill(self, backlog: list[WorkItem]) -> None:
        for item in backlog:
            await self.stages[item.stage].put(item)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.ctx.bus.publish(ev.QueueDepth(depths={n: s.depth for n, s in self.stages.items()}))
            self._publish_budget()
            self._changed.set()
