"""The analysis of a live or finished run (`evotui analyze`'s figures, engine/run/analysis.py):
the best-so-far timeline, the recycle rate per generation, the judge's edit types (cached answers
only: the TUI makes no judge call). The run's database is read in a worker when the screen is
first shown, on r, and on a live run again when the pool moved and REFRESH_S passed."""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from engine.run.analysis import RunAnalysis
from evotui.tui.backend import BackendError, Frame
from evotui.tui.keymap import ANALYSIS_BINDINGS
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.analysis import AnalysisPlot, edit_table, summary_text

REFRESH_S = 15.0
"""Least time between two automatic analyses of a live run (each reads the whole run)."""
clock = time.monotonic


@dataclass
class AnalysisReady(Message):
    analysis: RunAnalysis | None
    error: str = ""


class AnalysisScreen(EvoScreen):
    BINDINGS = ANALYSIS_BINDINGS
    HELP = """\
## Analysis
`evotui analyze`'s figures for this run, read from its database: the best score so far by
proposal, the share of added lines each generation that its lineage had deleted before
(recycled: literal, tuning, trivial) and the edit types an LLM judge gave each parent -> child
diff. The judge is never called from here: only answers `evotui analyze` cached are counted.
**r** analyses again; a live run is re-analysed when its pool moved (at most every 15 s).
"""

    def __init__(self) -> None:
        super().__init__()
        self.analysis: RunAnalysis | None = None
        self.error = ""
        self.running = False
        self._analysed_version: int | None = None
        self._started = float("-inf")
        self.analyses = 0
        self.retry_timer: Timer | None = None

    def body(self) -> ComposeResult:
        yield Static(summary_text(None), id="analysis-summary")
        with VerticalScroll(id="analysis-plots", can_focus=True):
            for kind in ("best", "recycle", "edits"):
                yield AnalysisPlot(kind, classes="analysis-plot")
            table = Static(edit_table(None), id="analysis-odds", classes="analysis-plot")
            table.border_title = "Edit types: share and odds of improving the parent"
            yield table

    def refresh_body(self, frame: Frame, app) -> None:
        version = frame.snap.pool_version
        if self._analysed_version is None:
            self._start(version)
        elif version != self._analysed_version and not frame.finished and not self.running:
            wait = self._started + REFRESH_S - clock()
            if wait <= 0:
                self._start(version)
            elif self.retry_timer is None:
                # A quiet sampler may not apply another frame: come back when the interval is over.
                self.retry_timer = self.set_timer(wait, self._retry, name="analysis-retry")

    def _retry(self) -> None:
        self.retry_timer = None
        frame = self.app.sampler.frame
        if frame is not None and not self.running:
            self._start(frame.snap.pool_version)

    def _start(self, version: int) -> None:
        if self.retry_timer is not None:
            self.retry_timer.stop()
            self.retry_timer = None
        self.running = True
        self._analysed_version = version
        self._started = clock()
        self.run_worker(self._analyse(), name="analysis", group="analysis", exclusive=True, exit_on_error=False,
                        description="analyse the run's database")

    async def _analyse(self) -> None:
        try:
            result = await self.app.backend.analysis()
        except BackendError as exc:
            self.post_message(AnalysisReady(None, str(exc)))
            return
        self.post_message(AnalysisReady(result, "" if result is not None else "this view has no database to read"))

    @on(AnalysisReady)
    def _ready(self, message: AnalysisReady) -> None:
        self.running = False
        self.analyses += 1
        self.analysis, self.error = message.analysis, message.error
        self.query_one("#analysis-summary", Static).update(summary_text(self.analysis, self.error))
        for plot in self.query(AnalysisPlot):
            plot.show(self.analysis)
        self.query_one("#analysis-odds", Static).update(edit_table(self.analysis))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # An unexpected failure (not a BackendError) still ends the analysis, and says why.
        if event.worker.group == "analysis" and event.state == WorkerState.ERROR:
            event.stop()
            self.post_message(AnalysisReady(None, repr(event.worker.error)))

    def action_reanalyse(self) -> None:
        if self.running:
            self.notify("An analysis is running", timeout=3)
            return
        frame = self.app.sampler.frame
        self._start(frame.snap.pool_version if frame is not None else 0)
