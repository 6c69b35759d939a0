"""The orchestrator: admission (the select stage) and the stage chain, in async or sync mode.

async: select keeps admitting items while budget and queue room allow; every stage streams.
sync:  GEPA semantics: the next item is admitted only when the previous one has left the
       pipeline, so each step runs its stages one after another, each waiting for all of its
       requests. Both modes use the same Stage and handler code.
Control: pause (no stage takes new items; running handlers finish, outputs are held), resume,
drain (admit nothing more, finish what is in flight, then stop), stop (cancel now; interrupted
items stay open in SQLite and are re-enqueued by a resume).
"""

from __future__ import annotations

import asyncio
import time

from engine import events as ev
from engine.context import FatalRunError, RunContext
from engine.items import WorkItem
from engine.pipeline.recorder import Recorder
from engine.pipeline.review import GATES, ReviewGates
from engine.pipeline.stage import Stage
from engine.pipeline.staleness import make_policy
from engine.stages.prompt_stages import PromptStages



class Orchestrator:
    def __init__(self, ctx: RunContext, handlers=None) -> None:
        self.ctx = ctx
        self.running = asyncio.Event()
        self.running.set()
        self.state = "idle"
        self.stop_reason = ""
        self.fatal: FatalRunError | None = None
        self._draining = False
        self._changed = asyncio.Event()
        self._stopped = asyncio.Event()
        self.handlers = handlers if handlers is not None else PromptStages(ctx)
        self.recorder = Recorder(ctx, self.handlers.CHECKED, on_item_end=self._item_ended, on_fatal=self._on_fatal)
        pipeline = self.handlers.PIPELINE
        cfg = ctx.config.pipeline
        sync = cfg.mode == "sync"
        self.stages: dict[str, Stage] = {}
        for name in pipeline:
            # In sync mode one item is in flight, so one worker per stage is all GEPA needs.
            workers = 1 if sync else cfg.workers.get(name, 1)
            self.stages[name] = Stage(
                name,
                getattr(self.handlers, name),
                capacity=cfg.queue_capacity,
                workers=workers,
                hooks=self.recorder,
                running=self.running,
                max_workers=max(workers, 256),
            )
        for up, down in zip(pipeline, pipeline[1:]):
            self.stages[up].downstream = self.stages[down]
        self.review = ReviewGates(ctx, self.stages, self.recorder.item_finished_at_gate)
        for gate in GATES:
            if gate in self.stages:
                self.stages[gate].handler = self.review.wrap(gate, self.stages[gate].handler)
        self.admitted = 0

    # -- control --------------------------------------------------------------------------
    def pause(self) -> None:
        if self.state == "running":
            self.running.clear()
            self._set_state("paused")

    def resume(self) -> None:
        if self.state == "paused":
            self.running.set()
            self._set_state("draining" if self._draining else "running")

    def drain(self, reason: str = "drain requested") -> None:
        if not self._draining:
            self._draining = True
            self.stop_reason = self.stop_reason or reason
            self.running.set()
            self._set_state("draining")
            self._changed.set()

    def stop(self, reason: str = "stopped") -> None:
        self.stop_reason = self.stop_reason or reason
        self._stopped.set()
        self._changed.set()

    def _set_state(self, state: str) -> None:
        self.state = state
        self.ctx.bus.publish(ev.StateChanged(state=state))

    def _on_fatal(self, exc: FatalRunError) -> None:
        if self.fatal is None:
            self.fatal = exc
        self.stop(f"fatal: {exc}")

    def _item_ended(self, item: WorkItem) -> None:
        self._changed.set()

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
        gap = self.ctx.config.pipeline.max_gap if max_gap is None else max_gap
        self.ctx.policy = make_policy(name, gap)
        self.ctx.bus.publish(ev.PolicyChanged(policy=name, max_gap=gap))

    @property
    def in_flight(self) -> int:
        return len(self.recorder.in_flight)

    # -- admission ------------------------------------------------------------------------
    def select(self) -> WorkItem:
        ctx = self.ctx
        parent, minibatch = self.handlers.select()
        item = WorkItem(
            item_id=ctx.next_item_id(),
            created_version=ctx.pool.version,
            parent_id=parent,
            minibatch=minibatch,
            stage=self.handlers.PIPELINE[0],
            created_at=time.time(),
        )
        ctx.bus.publish(
            ev.CandidateSelected(item_id=item.item_id, parent_id=parent, minibatch=item.minibatch, pool_version=ctx.pool.version)
        )
        return item

    async def _wait_until(self, predicate) -> None:
        while not predicate():
            self._changed.clear()
            await self._changed.wait()

    async def _admit(self) -> None:
        ctx = self.ctx
        # sync admits the next step only when the previous one has left the pipeline.
        limit = 1 if ctx.config.pipeline.mode == "sync" else ctx.config.pipeline.max_in_flight
        first = self.stages[self.handlers.PIPELINE[0]]
        while not self._draining:
            await self.running.wait()
            await self._wait_until(lambda: self.in_flight < limit or self._draining)
            if self._draining:
                break
            reservation = ctx.budget.try_reserve(self.handlers.estimate(), ctx.elapsed())
            if reservation is None:
                if self.in_flight and ctx.budget.exhausted != "wall_s":
                    # In-flight items may hand back unused reservations: retry when one ends.
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                self._publish_budget()
                self.drain(f"budget exhausted: {ctx.budget.exhausted}")
                break
            item = self.select()
            ctx.reservations[item.item_id] = reservation
            self.recorder.item_created(item)
            self.admitted += 1
            await first.put(item)

    def _publish_budget(self) -> None:
        ctx = self.ctx
        ctx.bus.publish(
            ev.BudgetUpdated(spent=ctx.budget.counters(ctx.elapsed()), limits=ctx.budget.limits_dict(), exhausted=ctx.budget.exhausted)
        )

    # -- run ------------------------------------------------------------------------------
    async def run(self, backlog: list[WorkItem]) -> str:
        """Run until drained or stopped; returns the final status (completed/interrupted/failed)."""
        ctx = self.ctx
        self._set_state("running")
        for stage in self.stages.values():
            stage.start()
        for item in backlog:
            # Interrupted work from an earlier session: reserve its cost without an admission test.
            ctx.reservations[item.item_id] = ctx.budget.reserve_unchecked(self.handlers.estimate())
            self.recorder.in_flight[item.item_id] = item
        refill = asyncio.create_task(self._refill(backlog), name="resume-backlog")
        admit = asyncio.create_task(self._admit(), name="select")
        watcher = asyncio.create_task(self._wait_until(lambda: self._stopped.is_set() or (
            self._draining and self.in_flight == self.review.pending_count and admit.done())), name="drain-watch")
        ticker = asyncio.create_task(self._tick(), name="tick")
        try:
            await watcher
        finally:
            for task in (admit, refill, ticker):
                task.cancel()
            await asyncio.gather(admit, refill, ticker, return_exceptions=True)
            for stage in self.stages.values():
                await stage.stop()
        if self.fatal is not None:
            return "failed"
        if self._stopped.is_set():
            return "interrupted"
        return "completed" if self.stop_reason.startswith("budget") else "interrupted"

    async def _refill(self, backlog: list[WorkItem]) -> None:
        for item in backlog:
            await self.stages[item.stage].put(item)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.ctx.bus.publish(ev.QueueDepth(depths={n: s.depth for n, s in self.stages.items()}))
            self._publish_budget()
            self._changed.set()
