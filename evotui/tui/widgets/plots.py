"""Plots of the run's history (engine/run/history.py) with axes, labels and legends, drawn by
textual-plotext. Line colours are read from the app theme's variables, so they follow theme
switches and stay legible on light and dark themes.

A plot redraws only when it is shown and its data moved on (the history's revision or the end of
the time axis), at most every MIN_INTERVAL while data streams in; a plot in a hidden panel
remembers that it is stale and redraws when shown.
"""

from __future__ import annotations

import time
from typing import ClassVar

from textual.color import Color
from textual.timer import Timer
from textual_plotext import PlotextPlot

from engine.run.history import (
    Line,
    RunHistory,
    depth_lines,
    latency_lines,
    rate_line,
    score_lines,
)

BUCKETS = 24
"""Windows the rate and latency plots divide the run into."""
clock = time.monotonic
"""The throttle's clock (tests replace it)."""
MIN_INTERVAL = 0.5
"""Seconds between two drawings of one plot while its data keeps changing."""
PALETTE = ("primary", "accent", "success", "error", "foreground", "secondary", "warning")
"""Theme variables the lines take their colours from, in legend order. The first five (one per
pipeline stage in the queue-depth plot) are far apart in every shipped theme; accent and warning
are near twins (equal in evotui-256), so warning comes last."""


class HistoryPlot(PlotextPlot):
    """One plot of a RunHistory; `kind` picks which (see TITLES)."""

    TITLES: ClassVar[dict[str, str]] = {
        "scores": "Best and mean score",
        "rate": "Proposals per minute",
        "depth": "Queue depth per stage",
        "gaps": "Version gap histogram",
        "calls": "LLM calls and tokens per minute",
        "latency": "LLM latency percentiles",
    }

    redraws = 0
    """How many times the figure was rebuilt (tests assert on it)."""

    def __init__(self, kind: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind = kind
        self._data: tuple[RunHistory | None, int, float] = (None, -1, 0.0)
        self._drawn: tuple[int, float] | None = None
        self._last_draw = 0.0
        self._pending: Timer | None = None
        self.visible_in_pane = False

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = self.TITLES[self.kind]
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def _timed_redraw(self) -> None:
        self._pending = None
        self._redraw()

    def _theme_changed(self, _theme) -> None:
        self._drawn = None  # the colours are the old theme's: stale, shown or not
        self._last_draw = 0.0
        self._redraw()

    def on_resize(self) -> None:
        self._redraw()

    def show(self, history: RunHistory | None, revision: int, now: float) -> None:
        """Take the latest data; draws if it is shown and changed."""
        self._data = (history, revision, round(now, 1))
        self._redraw()

    def set_shown(self, shown: bool) -> None:
        self.visible_in_pane = shown
        if shown:
            self._last_draw = 0.0  # a newly shown plot draws at once
        self._redraw()

    def _redraw(self) -> None:
        history, revision, now = self._data
        key = (revision, now)
        if not self.visible_in_pane or self.size.area == 0 or key == self._drawn:
            return  # hidden (another tab, or folded away at this terminal size) or unchanged
        wait = self._last_draw + MIN_INTERVAL - clock()
        if self._drawn is not None and self._drawn[0] >= 0 and wait > 0:  # (-1: drawn without data)
            # A plot is a large region to send: at most one drawing per MIN_INTERVAL while data
            # streams in; the timer draws the latest data once the interval is over.
            if self._pending is None:
                self._pending = self.set_timer(wait, self._timed_redraw, name="plot-redraw")
            return
        self._last_draw = clock()
        self._drawn = key
        self.redraws += 1
        plt = self.plt
        plt.clear_figure()
        if history is None:
            plt.title("no history yet")
        else:
            self._draw(history, now)
        self.refresh()

    def _colour(self, i: int) -> tuple[int, int, int]:
        variables = self.app.theme_variables
        return Color.parse(variables.get(PALETTE[i % len(PALETTE)]) or variables["foreground"]).rgb

    def _lines(self, lines: list[Line], ylabel: str, xlabel: str) -> None:
        plt = self.plt
        drawn = False
        for i, line in enumerate(lines):
            if line.x:
                plt.plot(list(line.x), list(line.y), label=line.label, color=self._colour(i), marker="braille")
                drawn = True
        if not drawn:
            plt.title("nothing yet")
        plt.xlabel(xlabel)
        plt.ylabel(ylabel)

    def _draw(self, h: RunHistory, now: float) -> None:
        unit = h.time_label
        if self.kind == "scores":
            self._lines(score_lines(h, now), "score", unit)
        elif self.kind == "rate":
            self._lines([rate_line(h, h.proposals, now, BUCKETS, f"proposals/{unit}")], f"per {unit}", unit)
        elif self.kind == "depth":
            self._lines(depth_lines(h, now), "items waiting", unit)
        elif self.kind == "calls":
            calls = rate_line(h, (c[0] for c in h.calls), now, BUCKETS, f"calls/{unit}")
            tokens = rate_line(h, (c[0] for c in h.calls), now, BUCKETS, f"k tokens/{unit}",
                               weights=[c[2] / 1000 for c in h.calls])
            self._lines([calls, tokens], f"per {unit}", unit)
        elif self.kind == "latency":
            self._lines(latency_lines(h, now, BUCKETS), "sim s" if h.simulated else "seconds", unit)
        else:
            self._gaps(h)

    def _gaps(self, h: RunHistory) -> None:
        plt = self.plt
        if not h.gaps:
            plt.title("no staleness checks yet")
            return
        gaps = sorted(h.gaps)
        plt.bar([str(g) for g in gaps], [h.gaps[g] for g in gaps], color=self._colour(1), width=0.6)
        plt.xlabel("version gap")
        plt.ylabel("items")
