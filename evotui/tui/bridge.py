"""The sampler: the only path from the engine to the widgets.

A timer reads one Frame from the backend a few times a second and applies it to the active
screen inside App.batch_update(); events are drained at the same tick into a capped log. A
tick never awaits, so it cannot overlap the next one, and it never blocks the engine: a slow
terminal only makes frames rarer. Modal screens and non-EvoScreens skip the apply (the frame is
dropped; the next one carries the latest state).
"""

from __future__ import annotations

from collections import deque

from textual.timer import Timer

from evotui.tui.backend import Backend, Frame


class Sampler:
    def __init__(self, app, backend: Backend, hz: float, log_lines: int) -> None:
        self.app = app
        self.backend = backend
        self.interval = 1.0 / hz
        self.frame: Frame | None = None
        self.ticks = 0
        self._log: deque[str] = deque(maxlen=log_lines)
        self._seq = 0
        self._timer: Timer | None = None

    def start(self) -> None:
        self._timer = self.app.set_interval(self.interval, self.tick, name="sampler")

    def pause(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()

    def lines_since(self, seq: int) -> tuple[list[str], int]:
        """Log lines after sequence number `seq` (at most the cap), and the current number."""
        new = min(self._seq - seq, len(self._log))
        return (list(self._log)[len(self._log) - new:] if new > 0 else []), self._seq

    def tick(self) -> None:
        self.ticks += 1
        lines = self.backend.poll()
        self._log.extend(lines)
        self._seq += len(lines)
        frame = self.backend.frame()
        if frame is None:
            return
        self.frame = frame
        screen = self.app.screen
        apply = getattr(screen, "apply", None)
        if apply is None:
            return
        with self.app.batch_update():
            apply(frame, self.app)
