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

    def body(self) -> ComposeResult:
        with Grid(id="dash"):
            yield QueuePanel(id="queues", classes="panel")
            yield ScoresPanel(id="scores", classes="panel")
            yield GapsPanel(id="gaps", classes="panel")
            yield BudgetPanel(id="budget", classes="panel")
            yield LLMPanel(id="llm", classes="panel")
        log = Log(id="log", max_lines=getattr(self.app, "log_lines", 500), classes="panel")
        log.border_title = "Events"
        yield log

    def refresh_body(self, frame: Frame, app) -> None:
        self.query_one(QueuePanel).show(frame, selected=app.selected_stage)
        self.query_one(ScoresPanel).show(frame)
        self.query_one(GapsPanel).show(frame)
        self.query_one(BudgetPanel).show(frame)
        self.query_one(LLMPanel).show(frame)
        lines, seq = app.sampler.lines_since(self._log_seen)
        if lines:
            self.query_one(Log).write_lines(lines)
        self._log_seen = seq
