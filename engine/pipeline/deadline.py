"""--max-wall as a deadline (BudgetConfig.max_wall_s, counted over every session of a run).

At the limit the run admits nothing more and drains; work still in flight when the grace after
it ends is cancelled and left open in the database, the way a stop leaves it, so `evotui resume`
re-enqueues it where it was. A batch job's time slot therefore ends within limit + grace, however
slowly the LLM server answers. The clock is injected: tests drive it by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable, TypeVar

from engine.config import BudgetConfig

T = TypeVar("T")

STEP_S = 1.0
"""Longest single sleep: the deadline looks at the clock again at least this often, so a clock
that jumps (a suspended machine, a test's clock) is noticed within a second."""


@dataclass
class DeadlineClock:
    """Seconds since the session started, and a way to wait; the engine's are monotonic time."""

    elapsed: Callable[[], float]
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


@dataclass
class DeadlineReport:
    """What the deadline did, for the run's summary."""

    limit_s: float
    grace_s: float
    hit: bool = False
    cancelled: list[dict] = field(default_factory=list)
    """Work still running when the grace ended: {"item_id", "stage"} (the seed: item_id "seed")."""

    def figures(self) -> dict:
        return {"limit_s": self.limit_s, "grace_s": self.grace_s, "hit": self.hit,
                "cancelled": [dict(c) for c in self.cancelled]}


class WallDeadline:
    def __init__(self, limit_s: float, grace_s: float, spent_before_s: float, clock: DeadlineClock) -> None:
        self.report = DeadlineReport(limit_s=limit_s, grace_s=grace_s)
        self.spent_before_s = spent_before_s
        """Wall seconds earlier sessions used: a resumed run's deadline comes that much sooner."""
        self.clock = clock

    @classmethod
    def of(cls, limits: BudgetConfig, spent_before_s: float, clock: DeadlineClock) -> WallDeadline | None:
        if limits.max_wall_s is None:
            return None
        return cls(limits.max_wall_s, limits.wall_grace_s(), spent_before_s, clock)

    def left_s(self) -> float:
        """Seconds until the limit (negative past it)."""
        return self.report.limit_s - self.spent_before_s - self.clock.elapsed()

    async def _until(self, left: Callable[[], float]) -> None:
        while (remaining := left()) > 0:
            await self.clock.sleep(min(remaining, STEP_S))

    async def run(self, at_limit: Callable[[], None], at_grace_end: Callable[[], None]) -> None:
        """Call at_limit() at the limit and at_grace_end() when the grace after it is over; the
        caller cancels this once the run has ended on its own."""
        await self._until(self.left_s)
        self.report.hit = True
        at_limit()
        await self._until(lambda: self.left_s() + self.report.grace_s)
        at_grace_end()

    async def within(self, work: Awaitable[T], what: dict) -> tuple[bool, T | None]:
        """Await `work` until it ends or the grace after the limit is over, then cancel it:
        (True, its result) or (False, None) with `what` recorded as cancelled."""
        task = asyncio.ensure_future(work)
        timer = asyncio.create_task(self._until(lambda: self.left_s() + self.report.grace_s))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (task, timer):
                if not t.done():
                    t.cancel()
            # Exceptions of the work are re-raised below, by result(); the timer's are none.
            await asyncio.gather(task, timer, return_exceptions=True)
        if task.cancelled() and timer.done() and not timer.cancelled():
            self.report.hit = True
            self.report.cancelled.append(dict(what))
            return False, None
        return True, task.result()


DEADLINE_REASON = "budget exhausted: wall_s"
"""The same words as admission's own wall check, which may come first: one reason either way."""


class DeadlineStops:
    """The Orchestrator's side of the deadline: a drain at the limit, a stop at the grace's end.
    A stop by the deadline ends the run as its budget does (completed), its cancelled work open.
    Uses the Orchestrator's ctx, clock, deadline, recorder, _stopped, drain(), stop() and
    _publish_budget()."""

    def deadline_for(self) -> WallDeadline | None:
        """This session's deadline (one per session: the seed evaluation and the pipeline share it)."""
        if self.deadline is None:
            self.deadline = WallDeadline.of(self.ctx.config.budget, self.ctx.budget.wall_spent_before, self.clock)
        return self.deadline

    def _deadline_reached(self) -> None:
        self.ctx.budget.exhausted = "wall_s"
        self._publish_budget()
        self.drain(DEADLINE_REASON)

    def _deadline_grace_over(self) -> None:
        """The grace is over: cancel what still runs; it stays open for a resume to redo."""
        if self._stopped.is_set():
            return
        self.deadline.report.cancelled = [{"item_id": item.item_id, "stage": item.stage}
                                          for item in self.recorder.in_flight.values()]
        self._deadline_stopped = True
        self.stop(DEADLINE_REASON)
