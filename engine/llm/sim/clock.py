"""Simulated time for the simulated backend: a clock that maps simulated seconds to event-loop
time (RealClock), or one that only moves when told to (ManualClock, exact and instant, for
tests). Both run callbacks at simulated instants (``call_at``)."""

from __future__ import annotations

import asyncio
import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Simulated time source; ``call_at`` runs a callback at a simulated instant."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class RealClock:
    """Simulated seconds = event-loop seconds since first use * time_scale."""

    def __init__(self, time_scale: float) -> None:
        self.time_scale = time_scale
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0

    def _bind(self) -> asyncio.AbstractEventLoop | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._loop  # read outside the loop (metrics after a run): its clock still works
        if self._loop is None:
            self._loop, self._t0 = loop, loop.time()
        elif loop is not self._loop:
            # Timers of the old loop would never fire; one backend serves one loop.
            raise RuntimeError("simulated backend used from a second event loop; create one app per loop")
        return loop

    def now(self) -> float:
        loop = self._bind()
        return 0.0 if loop is None else (loop.time() - self._t0) * self.time_scale

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = self._bind()
        if loop is None:
            raise RuntimeError("the simulated backend needs a running event loop")
        return loop.call_at(self._t0 + when / self.time_scale, callback)


@dataclass(order=True)
class Timer:
    """A callback due at a simulated instant (ManualClock, VirtualClock)."""

    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to: ``advance()`` fires due timers in time order."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[Timer] = []
        self._seq = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        self._seq += 1
        heapq.heappush(self._heap, timer := Timer(max(when, self._now), self._seq, callback))
        return timer

    def advance(self, until: float = math.inf) -> None:
        """Fire every timer due at or before ``until`` (all of them by default)."""
        while self._heap and self._heap[0].when <= until:
            timer = heapq.heappop(self._heap)
            if not timer.cancelled:
                self._now = timer.when
                timer.callback()
        if until != math.inf:
            self._now = max(self._now, until)
