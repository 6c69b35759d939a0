"""A pipeline stage: bounded input queue, resizable worker set, production-rate meter.

Workers take an item, run the stage handler and write the result downstream. A full
downstream queue blocks the worker (backpressure). Pausing stops workers from taking new items;
anything already in a handler finishes and its output is held in the downstream queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol

from engine.items import WorkItem

Handler = Callable[[WorkItem], Awaitable["WorkItem | None | _Parked"]]


class _Parked:
    def __repr__(self) -> str:
        return "PARKED"


PARKED = _Parked()
"""Handler result: the item is held elsewhere (review) and neither forwarded nor ended."""


class StageHooks(Protocol):
    def item_started(self, stage: "Stage", item: WorkItem) -> str | None:
        """Called when a worker takes an item; returns a reason to drop it (staleness) or None."""

    def item_finished(self, stage: "Stage", item: WorkItem, started_at: float, outcome: str) -> None: ...

    def handler_crashed(self, stage: "Stage", item: WorkItem, exc: BaseException) -> None: ...


class RateMeter:
    """Items a stage finished per second over a sliding window of wall time."""

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._marks: deque[float] = deque()
        self.total = 0

    def mark(self) -> None:
        self._marks.append(self.clock())
        self.total += 1

    def rate(self) -> float:
        now = self.clock()
        while self._marks and now - self._marks[0] > self.window_s:
            self._marks.popleft()
        return len(self._marks) / self.window_s


@dataclass
class StageStats:
    taken: int = 0
    forwarded: int = 0
    ended: int = 0
    dropped: int = 0
    crashed: int = 0
    parked: int = 0


class Stage:
    def __init__(
        self,
        name: str,
        handler: Handler,
        *,
        capacity: int,
        workers: int,
        hooks: StageHooks,
        running: asyncio.Event,
        clock: Callable[[], float] = time.monotonic,
        min_workers: int = 1,
        max_workers: int = 256,
        gate: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        self.handler = handler
        self.queue: asyncio.Queue[WorkItem] = asyncio.Queue(maxsize=capacity)
        self.capacity = capacity
        self.hooks = hooks
        self.running = running
        self.clock = clock
        self.downstream: Stage | None = None
        self.gate = gate
        """Awaited before a worker takes an item (the store's backpressure)."""
        self.meter = RateMeter(clock=clock)
        self.stats = StageStats()
        self.min_workers = min_workers
        self.max_workers = max_workers
        self.target_workers = max(min_workers, min(workers, max_workers))
        self.busy = 0
        self.blocked = 0
        """Workers waiting for room downstream (backpressure)."""
        self.held = 0
        """Items taken from the queue while a pause began; they start on resume."""
        self._tasks: set[asyncio.Task] = set()
        self._idle: set[asyncio.Task] = set()
        self._next_worker = 0

    @property
    def depth(self) -> int:
        return self.queue.qsize()

    @property
    def workers(self) -> int:
        return len(self._tasks)

    def mark_enqueued(self, item: WorkItem) -> None:
        item.stage = self.name
        item.enqueued_at = time.time()

    async def put(self, item: WorkItem) -> None:
        self.mark_enqueued(item)
        await self.queue.put(item)

    def start(self) -> None:
        self.resize(self.target_workers)

    def resize(self, n: int) -> int:
        """Set the worker count within [min, max]; extra workers retire after their item."""
        self.target_workers = max(self.min_workers, min(n, self.max_workers))
        while len(self._tasks) < self.target_workers:
            self._spawn()
        # Idle workers (waiting on an empty queue) can go now; busy ones retire after their item.
        for task in list(self._idle)[: max(0, len(self._tasks) - self.target_workers)]:
            self._idle.discard(task)
            self._tasks.discard(task)
            task.cancel()
        return self.target_workers

    def _spawn(self) -> None:
        self._next_worker += 1
        task = asyncio.create_task(self._work(), name=f"{self.name}-{self._next_worker}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> list[asyncio.Task]:
        """Cancel every worker now (no await, so nothing else starts in between)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def stop(self) -> None:
        await asyncio.gather(*self.cancel(), return_exceptions=True)

    def _should_retire(self) -> bool:
        """True if this worker must leave; it leaves the worker set at once so that several
        workers finishing in the same loop turn cannot all retire below the target."""
        if len(self._tasks) > self.target_workers:
            self._tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            return True
        return False

    async def _work(self) -> None:
        me = asyncio.current_task()
        while not self._should_retire():
            await self.running.wait()
            if self.gate is not None:
                await self.gate()
            if self._should_retire():
                return
            self._idle.add(me)
            try:
                item = await self.queue.get()
            finally:
                self._idle.discard(me)
            self.held += 1
            try:
                # Paused between taking and starting: hold the item, do not start its work.
                await self.running.wait()
            finally:
                self.held -= 1
            await self._process(item)

    async def _process(self, item: WorkItem) -> None:
        try:
            out = await self.run_one(item)
        finally:
            self.queue.task_done()
        if out is None or out is PARKED or self.downstream is None:
            return
        self.blocked += 1
        try:
            await self.downstream.put(out)
        finally:
            self.blocked -= 1
        self.stats.forwarded += 1

    async def run_one(self, item: WorkItem) -> "WorkItem | None | _Parked":
        """Check, run the handler, record; returns the item to forward (or None / PARKED).

        Workers call it for queued items; the lockstep (pxn) runner calls it directly.
        """
        self.stats.taken += 1
        started = time.time()
        drop_reason = self.hooks.item_started(self, item)
        if drop_reason is not None:
            self.stats.dropped += 1
            self.meter.mark()
            self.hooks.item_finished(self, item, started, drop_reason)
            return None
        self.busy += 1
        try:
            out = await self.handler(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler bug must not kill the worker; it is recorded loudly
            self.stats.crashed += 1
            self.hooks.handler_crashed(self, item, exc)
            return None
        finally:
            self.busy -= 1
        if out is PARKED:
            self.stats.parked += 1
            self.hooks.item_finished(self, item, started, "parked")
            return PARKED
        # The production rate counts every item the stage finished with (forwarded or ended).
        self.meter.mark()
        if out is None or self.downstream is None:
            self.stats.ended += 1
            self.hooks.item_finished(self, item, started, item.outcome if item.outcome is not None else "done")
            return None
        self.hooks.item_finished(self, item, started, "forwarded")
        return out
