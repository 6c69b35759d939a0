"""The first screen: queue pressure, version gaps, scores, LLM, budget, event log."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid
from textual.widgets import Log

from evotui.tui.backend import Frame
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.panels import BudgetPanel, GapsPanel, LLMPanel, QueuePanel, ScoresPanel


class DashboardScreen(EvoScreen):
    HELP = """\
## Dashboard
Queues (depth/capacity, busy/workers, rate, depth history, **BP** = backpressure), version gaps,
scores, LLM endpoints, budget and the event log. Select a stage with **w**, change its workers
with **+**/**-**. Space pauses; **2** opens the review queue, **3** the lineage.
"""

    def __init__(self) -> None:
        super().__init__()
        self._log_seen = 0
        # Kept rather than queried on every sampler tick; each panel skips its own repaint when
        # its markup did not change.
        self.queues = QueuePanel(id="queues", classes="panel")
        self.scores = ScoresPanel(id="scores", classes="panel")
        self.panels = (GapsPanel(id="gaps", classes="panel"), BudgetPanel(id="budget", classes="panel"),
                       LLMPanel(id="llm", classes="panel"))
        self.log_view: Log | None = None

    def body(self) -> ComposeResult:
        with Grid(id="dash"):
            yield self.queues
            yield self.scores
            yield from self.panels
        self.log_view = Log(id="log", max_lines=getattr(self.app, "log_lines", 500), classes="panel")
        self.log_view.border_title = "Events"
        yield self.log_view

    def refresh_body(self, frame: Frame, app) -> None:
        self.queues.show(frame, selected=app.selected_stage)
        self.scores.show(frame)
        for panel in self.panels:
            panel.show(frame)
        lines, seq = app.sampler.lines_since(self._log_seen)
        if lines and self.log_view is not None:
            self.log_view.write_lines(lines)
        self._log_seen = seq
