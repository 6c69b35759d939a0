"""The analysis screen's plots (textual-plotext) and summary: the best-so-far timeline, the
recycle rate per generation, the edit types the judge labelled and the most recycled lines.
Colours come from the app theme's variables, as in plots.py."""

from __future__ import annotations

from typing import ClassVar

from textual.color import Color
from textual.content import Content
from textual_plotext import PlotextPlot

from engine.run.analysis import RunAnalysis
from evotui.tui.widgets.panels import fmt

PALETTE = ("primary", "accent", "success", "warning")


class AnalysisPlot(PlotextPlot):
    """One figure of a RunAnalysis; `kind` picks which (see TITLES)."""

    TITLES: ClassVar[dict[str, str]] = {
        "best": "Best so far by proposal",
        "recycle": "Recycled lines per generation (%)",
        "edits": "Edit types (judge labels)",
    }

    def __init__(self, kind: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kind = kind
        self.analysis: RunAnalysis | None = None
        self.draws = 0

    def on_mount(self) -> None:
        super().on_mount()
        self.border_title = self.TITLES[self.kind]
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.draw())

    def show(self, analysis: RunAnalysis | None) -> None:
        if analysis is not self.analysis:
            self.analysis = analysis
            self.draw()

    def _colour(self, i: int) -> tuple[int, int, int]:
        variables = self.app.theme_variables
        return Color.parse(variables.get(PALETTE[i % len(PALETTE)]) or variables["foreground"]).rgb

    def draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        self.draws += 1
        a = self.analysis
        if a is None:
            plt.title("analysing…")
        elif self.kind == "best":
            self._best(a)
        elif self.kind == "recycle":
            self._recycle(a)
        else:
            self._edits(a)
        self.refresh()

    def _best(self, a: RunAnalysis) -> None:
        steps = [s for s in a.timeline if s.score is not None]
        if not steps:
            self.plt.title("no scored artifact yet")
            return
        # A step line: each best holds until the next one, then to the last proposal.
        xs, ys = [], []
        for s, nxt in zip(steps, [*steps[1:], None]):
            end = nxt.proposal if nxt is not None else max(a.proposals, s.proposal)
            xs += [s.proposal, end]
            ys += [s.score, s.score]
        self.plt.plot(xs, ys, color=self._colour(0), marker="braille", label="best so far")
        self.plt.xlabel("proposal")
        self.plt.ylabel("score")

    def _recycle(self, a: RunAnalysis) -> None:
        gens = [g for g in a.per_generation if g.added]
        if not gens:
            self.plt.title("no added lines yet")
            return
        self.plt.bar([str(g.generation) for g in gens], [round(100 * g.rate, 1) for g in gens],
                     color=self._colour(3), width=0.6)
        self.plt.xlabel("generation")
        self.plt.ylabel("% recycled")

    def _edits(self, a: RunAnalysis) -> None:
        rows = [t for t in a.edit_types if t.edits]
        if not rows:
            self.plt.title("no judged edits: run `evotui analyze`" if a.edits_total else "no edits yet")
            return
        rows.sort(key=lambda t: t.edits)
        self.plt.bar([t.label.replace("_", " ") for t in rows], [t.edits for t in rows],
                     orientation="horizontal", color=self._colour(1), width=0.6)
        self.plt.xlabel("edits")


def edit_table(a: RunAnalysis | None) -> Content:
    """Each edit type with its count, prevalence and odds ratio of improving the parent."""
    head = Content.styled(f"{'edit type':<22}{'edits':>6}{'share':>7}{'odds':>7}", "bold $text-muted")
    if a is None or not a.edit_types:
        return Content("\n").join([head, Content.styled("no judged edits", "$text-muted")])
    rows = [head]
    for t in sorted(a.edit_types, key=lambda t: (-t.edits, t.label)):
        odds = "-" if t.odds_ratio is None else f"{t.odds_ratio:.2f}"
        rows.append(Content(f"{t.label.replace('_', ' '):<22}{t.edits:>6}{100 * t.prevalence:>6.0f}%{odds:>7}"))
    return Content("\n").join(rows)


def summary_text(a: RunAnalysis | None, error: str = "") -> Content:
    """The figures above the plots, and the most recycled lines."""
    if error:
        return Content.styled(f"analysis failed: {error}", "$text-error")
    if a is None:
        return Content.styled("analysing the run's database…", "$text-muted")
    classes = ", ".join(f"{k} {v}" for k, v in a.by_class.items() if v) or "none"
    lines = [
        Content.assemble(("best      ", "bold $text-muted"),
                         f"{a.best_id or '-'} {fmt(a.best_score)} · {len(a.timeline) - 1 if a.timeline else 0} "
                         f"best-so-far steps in {a.proposals} proposals"),
        Content.assemble(("recycled  ", "bold $text-muted"),
                         f"{100 * a.recycle_rate:.1f}% of {a.added_lines} added lines ({classes})"),
        Content.assemble(("judged    ", "bold $text-muted"),
                         f"{a.edits_labelled} of {a.edits_total} edits"
                         + ("" if a.edits_labelled == a.edits_total else " (`evotui analyze` labels the rest)")),
    ]
    for line, kind, count in a.top_lines[:3]:
        lines.append(Content.assemble(("  ", ""), (f"{count}x {kind:<8}", "$text-warning"), f" {line}"))
    return Content("\n").join(lines)
