"""The sampler: the only path from the engine to the widgets.

A timer reads one Frame from the backend a few times a second and applies it to the active
screen inside App.batch_update(); events are drained at the same tick into a capped log. A
tick never awaits, so it cannot overlap the next one, and it never blocks the engine: a slow
terminal only makes frames rarer. Modal screens and non-EvoScreens skip the apply (the frame is
dropped; the next one carries the latest state).

The sampler is quiet: a frame equal to the one last applied (and no new log line, same stage
selection, same screen) is not applied at all, and while the run is paused or finished the wall
clock, the only thing still moving, is held, so an idle TUI writes nothing to the terminal. The
next tick is scheduled after the current one (never a backlog of ticks), and when a tick takes
long (a busy engine shares this event loop) the interval stretches so the TUI stays a small
share of the loop.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from types import MappingProxyType

from textual.app import ScreenStackError
from textual.timer import Timer

from evotui.tui.backend import Backend, Frame

BUDGET = 0.02
"""Target share of the event loop for sampling and applying frames."""
MAX_INTERVAL = 1.0
"""Never sample less than once a second, however slow a tick was."""


class Sampler:
    def __init__(self, app, backend: Backend, hz: float, log_lines: int) -> None:
        self.app = app
        self.backend = backend
        self.base_interval = 1.0 / hz
        self.interval = self.base_interval
        self.frame: Frame | None = None
        self.ticks = 0
        self.applied = 0
        """Ticks that reached the screen (the rest found nothing new)."""
        self._log: deque[str] = deque(maxlen=log_lines)
        self._seq = 0
        self._timer: Timer | None = None
        self._paused = False
        self._last_key: tuple | None = None
        self._run_paused_s = 0.0
        """Run seconds between samples that found the run paused, counted once it runs again."""
        self._pause_open = 0.0
        self._last_raw: tuple[str, float] | None = None

    def start(self) -> None:
        self._schedule()

    def _schedule(self) -> None:
        self._timer = self.app.set_timer(self.interval, self._timed_tick, name="sampler")

    def _timed_tick(self) -> None:
        if self._paused:
            return  # resume() schedules the next one
        try:
            self.tick()
        except ScreenStackError:
            return  # the app is shutting down (its screens are gone): stop sampling
        self._schedule()

    def pause(self) -> None:
        self._paused = True
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            self._schedule()

    def lines_since(self, seq: int) -> tuple[list[str], int]:
        """Log lines after sequence number `seq` (at most the cap), and the current number."""
        new = min(self._seq - seq, len(self._log))
        return (list(self._log)[len(self._log) - new:] if new > 0 else []), self._seq

    def tick(self) -> None:
        started = time.perf_counter()
        self.ticks += 1
        try:
            self._sample()
        finally:
            self._adapt(time.perf_counter() - started)

    def _sample(self) -> None:
        lines = self.backend.poll()
        self._log.extend(lines)
        self._seq += len(lines)
        frame = self.backend.frame()
        if frame is None:
            return
        frame = self._hold_clock(self._count_pauses(frame))
        self.frame = frame
        screen = self.app.screen
        apply = getattr(screen, "apply", None)
        if apply is None:
            return
        key = (frame, self._seq, self.app.selected_stage, id(screen), self.app.size)
        if key == self._last_key:
            return
        with self.app.batch_update():
            applied = apply(frame, self.app)
        # A screen that was not ready yet gets the same frame again next tick.
        self._last_key = key if applied is not False else None
        self.applied += 1

    def _count_pauses(self, frame: Frame) -> Frame:
        """Frame with the run's paused time so far: the run time from a sample that found it
        paused to the next sample, added when the run is running again (so an idle screen's
        figures stand still while paused)."""
        state, elapsed = frame.snap.state, frame.snap.elapsed_s
        if self._last_raw is not None and self._last_raw[0] == "paused":
            self._pause_open += max(0.0, elapsed - self._last_raw[1])
        self._last_raw = (state, elapsed)
        if state != "paused" and self._pause_open:
            self._run_paused_s += self._pause_open
            self._pause_open = 0.0
        return replace(frame, paused_s=self._run_paused_s) if self._run_paused_s else frame

    def _hold_clock(self, frame: Frame) -> Frame:
        """While paused or finished, keep the clock-driven figures of the last frame (elapsed
        time, the wall_s budget, stage rates, which decay over a time window), so the clock alone
        does not repaint an idle screen."""
        last = self.frame
        idle = frame.finished or frame.snap.state == "paused"
        if not idle or last is None or not (last.finished or last.snap.state == "paused"):
            return frame
        snap, held = frame.snap, last.snap
        spent = dict(snap.budget_spent)
        if "wall_s" in held.budget_spent:
            spent["wall_s"] = held.budget_spent["wall_s"]
        rates = {st.name: st.rate_per_s for st in held.stages}
        stages = tuple(replace(st, rate_per_s=rates.get(st.name, st.rate_per_s)) for st in snap.stages)
        return replace(frame, snap=replace(snap, elapsed_s=held.elapsed_s, budget_spent=MappingProxyType(spent),
                                           stages=stages))

    def _adapt(self, cost: float) -> None:
        """Stretch the interval when a tick costs more than BUDGET of it; relax back when cheap.
        The cost measured is the synchronous part (sampling and building widget content); the
        repaint that follows scales with it."""
        wanted = min(MAX_INTERVAL, max(self.base_interval, cost / BUDGET))
        # Stretch at once, relax gradually: one cheap tick after a burst should not snap back.
        self.interval = wanted if wanted > self.interval else max(wanted, self.interval * 0.8)
