"""The first screen: panels in tabs. Overview (queues, scores, and at 120 columns and wider the
version gaps, budget and LLM figures; at 120x46 and larger three plots; the event log below), then one tab per topic with its plots
and, for the figures the overview folds away at 80 columns, its text panel. `[` and `]` (or a
click on the tab) switch panels, so every panel is reachable at 80x24."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import TabbedContent, TabPane

from evotui.tui.backend import Frame
from evotui.tui.keymap import DASHBOARD_BINDINGS
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.eventlog import FollowLog
from evotui.tui.widgets.panels import (
    BudgetPanel,
    GapsPanel,
    LLMPanel,
    QueuePanel,
    ScoresPanel,
)
from evotui.tui.widgets.plots import HistoryPlot
from evotui.tui.widgets.spend import SpendPanel

PANES = (("overview", "Overview"), ("scores-tab", "Scores"), ("queues-tab", "Queues & gaps"),
         ("llm-tab", "LLM"), ("budget-tab", "Budget & spend"))
"""(pane id, tab label) in tab order."""


class DashboardScreen(EvoScreen):
    BINDINGS = DASHBOARD_BINDINGS
    HELP = """\
## Dashboard
Tabs: **Overview** (queues with depth/capacity, busy/workers, rate, **BP** = backpressure; scores;
on wide terminals gaps, budget and LLM; the event log), **Scores** (best and mean score, proposals
per minute), **Queues & gaps** (queue depth per stage, version-gap histogram), **LLM** (calls and
tokens per minute, latency p50/p95), **Budget & spend** (each limit's use; dollars and GPU-hours
per stage and model against `--max-usd` / `--max-gpu-hours`; GPU slots busy per GPU, also a line
under Queues when evaluations lease GPU slots). **]** / **[** switch tabs. The log follows new
lines unless you scroll up; **End** follows again. Select a stage with **w**, change its workers
with **+**/**-**. Space pauses; **2** opens the review queue, **3** the lineage.
"""

    def __init__(self) -> None:
        super().__init__()
        # Kept rather than queried on every sampler tick; each panel skips its own repaint when
        # its markup did not change, each plot when its data did not.
        self.queues = QueuePanel(id="queues", classes="panel")
        self.scores = ScoresPanel(id="scores", classes="panel")
        self.panels = (GapsPanel(id="gaps", classes="panel wide-only"),
                       BudgetPanel(id="budget", classes="panel wide-only"),
                       LLMPanel(id="llm", classes="panel wide-only"),
                       GapsPanel(id="gaps-full", classes="panel"),
                       LLMPanel(id="llm-full", classes="panel", by_stage=True),
                       BudgetPanel(id="budget-full", classes="panel"),
                       SpendPanel(id="spend", classes="panel"))
        self.plots = {pane: tuple(HistoryPlot(kind, id=f"plot-{kind}-{pane}", classes="plot") for kind in kinds)
                      for pane, kinds in (("overview", ("scores", "rate", "depth")), ("scores-tab", ("scores", "rate")), ("queues-tab", ("depth", "gaps")),
                                          ("llm-tab", ("calls", "latency")))}
        self.log_view = FollowLog(id="log", max_lines=500, classes="panel")
        self._log_seen = 0

    def body(self) -> ComposeResult:
        self.log_view.max_lines = getattr(self.app, "log_lines", 500)
        self.log_view.border_title = "Events"
        gaps, budget, llm, gaps_full, llm_full, budget_full, spend = self.panels
        with TabbedContent(id="dash-tabs", initial="overview"):
            with TabPane("Overview", id="overview"):
                with Grid(id="dash"):
                    yield self.queues
                    yield self.scores
                    yield gaps
                    yield budget
                    yield llm
                with Horizontal(id="overview-plots", classes="plots"):
                    yield from self.plots["overview"]
                yield self.log_view
            with TabPane("Scores", id="scores-tab"), Horizontal(classes="plots"):
                yield from self.plots["scores-tab"]
            with TabPane("Queues & gaps", id="queues-tab"), Vertical():
                yield gaps_full
                with Horizontal(classes="plots"):
                    yield from self.plots["queues-tab"]
            with TabPane("LLM", id="llm-tab"), Vertical():
                yield llm_full
                with Horizontal(classes="plots"):
                    yield from self.plots["llm-tab"]
            with TabPane("Budget & spend", id="budget-tab"), Vertical(id="budget-box"):
                yield budget_full
                yield spend

    @property
    def active_pane(self) -> str:
        return self.query_one("#dash-tabs", TabbedContent).active

    def on_mount(self) -> None:
        super().on_mount()
        for plot in self.plots["overview"]:
            plot.set_shown(True)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        active = event.pane.id
        for pane, plots in self.plots.items():
            for plot in plots:
                plot.set_shown(pane == active)

    def refresh_body(self, frame: Frame, app) -> None:
        self.queues.show(frame, selected=app.selected_stage)
        self.scores.show(frame)
        for panel in self.panels:
            panel.show(frame)
        for plots in self.plots.values():
            for plot in plots:
                plot.show(frame.history, frame.history_rev, frame.history_now)
        lines, seq = app.sampler.lines_since(self._log_seen)
        self.log_view.add(lines)
        self._log_seen = seq

    # -- actions --------------------------------------------------------------------------
    def action_switch_panel(self, step: int) -> None:
        ids = [pane for pane, _ in PANES]
        tabs = self.query_one("#dash-tabs", TabbedContent)
        tabs.active = ids[(ids.index(tabs.active) + step) % len(ids)]

    def action_follow_log(self) -> None:
        self.query_one("#dash-tabs", TabbedContent).active = "overview"
        self.log_view.follow()
