"""A simulated clock that counts the clients' work at its own cost and waits for free.

RealClock makes simulated seconds = wall seconds x time_scale, so everything the clients do
between requests (engine code, prompt building, program evaluation) is stretched by the time
scale too, and a loaded machine adds its contention on top: at x100 a 10 ms stall of the client
reads as a simulated second. VirtualClock is a discrete-event clock driven by what the clients
are seen doing (client_watch.py):
- simulated time always moves by the CPU time the clients used (the largest any one of their
  processes used: their work would run side by side on a real box);
- once every client is seen idle with requests in flight (they wait on the backend and nothing
  else), it jumps to the next backend event, and keeps jumping while those events deliver
  nothing (internal steps of the serving model);
- when the clients are idle with no request in flight they wait on their own timers (a
  Retry-After, a poll): simulated time then moves at wall time x time_scale, as RealClock does.
The server's own CPU time is never counted (on a real box the GPU does that work).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from typing import Callable

from engine.llm.sim.client_watch import ClientWatch, ClientWatchError, Sample
from engine.llm.sim.clock import ManualClock

TICK_S = 0.002
"""Wall seconds between looks at the clients."""
SETTLE = 1
"""Consecutive idle looks before a jump. One suffices: every hand-off a client waits on is seen at
once (a reply lands in its socket queue, a woken thread is runnable from the waker's syscall)."""


class VirtualClock(ManualClock):
    """`drive(activity)` must run as a task of the server's event loop; `activity()` is True while
    the server itself has work in hand (a request read but not yet queued, a reply not yet sent)."""

    def __init__(self, time_scale: float, watch: Callable[[], Sample] | ClientWatch,
                 wall: Callable[[], float] = time.monotonic) -> None:
        super().__init__()  # timers and advance(): what a clock moved by hand does
        self.time_scale = time_scale
        self._sample = watch.sample if isinstance(watch, ClientWatch) else watch
        self._wall = wall
        self.jumps = 0
        self.busy_looks = 0
        self.idle_looks = 0
        self.waited_s = 0.0
        """Simulated seconds counted at wall x scale (clients idle, nothing in flight)."""
        self.client_cpu_s = 0.0
        """Simulated seconds counted as the clients' CPU time."""

    def _next_due(self) -> float | None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].when if self._heap else None

    def look(self, activity: Callable[[], bool], idle_run: int, wall_dt: float) -> int:
        """One look at the clients; returns the new count of consecutive idle looks."""
        s = self._sample()
        # The clients' CPU time always counts, also a poller's that is otherwise idle.
        self.client_cpu_s += s.cpu_s
        self.advance(self._now + s.cpu_s)
        if s.busy or activity():
            self.busy_looks += 1
            return 0
        self.idle_looks += 1
        if self._next_due() is None:  # the clients wait on their own timers
            self.waited_s += wall_dt * self.time_scale
            self.advance(self._now + wall_dt * self.time_scale)
            return idle_run + 1
        if idle_run + 1 < SETTLE:
            return idle_run + 1
        # Everyone waits on the backend: jump event by event until one hands the server work.
        while (due := self._next_due()) is not None:
            self.jumps += 1
            self.advance(due)
            if activity():
                break
        return 0

    async def drive(self, activity: Callable[[], bool], warn: Callable[[str], None]) -> None:
        idle_run, last, watching = 0, self._wall(), True
        while True:
            await asyncio.sleep(TICK_S)
            now = self._wall()
            if watching:
                try:
                    idle_run = self.look(activity, idle_run, now - last)
                except ClientWatchError as exc:  # the clients are gone: nobody is left to measure
                    warn(f"virtual clock: {exc}; simulated time now runs at wall time x {self.time_scale:g}")
                    watching = False
            if not watching:
                self.advance(self._now + (now - last) * self.time_scale)
            last = now

    def figures(self) -> dict:
        return {"clock": "virtual", "jumps": self.jumps, "busy_looks": self.busy_looks,
                "idle_looks": self.idle_looks, "client_cpu_s": self.client_cpu_s, "waited_s": self.waited_s}
