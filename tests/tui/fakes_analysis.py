"""Frozen data for the analysis screen: a hand-made program lineage whose edits recycle lines
(literal, tuning, trivial) and carry cached judge labels, analysed by engine/run/analysis.py."""

from __future__ import annotations

from engine.run.analysis import RunAnalysis, summarise
from engine.trace.analyze import edits
from engine.trace.model import Trace
from evotui.tui.backend import ArtifactView
from tests.tui.fakes import FrozenBackend

MODEL = "sim-judge"
BASE = "def f(xs):\n    rate = 0.99992\n    # tuned by hand\n    total = sum(xs) * rate\n    return total\n"
STEPS = [
    ("s", None, BASE, 0.10),
    ("a", "s", BASE.replace("rate = 0.99992", "rate = 0.99988").replace("    # tuned by hand\n", ""), 0.20),
    ("b", "a", BASE.replace("rate = 0.99992", "rate = 0.99988"), 0.18),
    ("c", "b", BASE, 0.35),
    ("d", "c", BASE.replace("rate = 0.99992", "rate = 0.5"), 0.30),
    ("e", "d", BASE.replace("rate = 0.99992", "rate = 0.5") + "\ndef g(xs):\n    return max(xs)\n", 0.52),
    ("x", "s", BASE.replace("sum(xs)", "sum(sorted(xs))"), 0.12),
]
LABELS = {"a": ["hyperparameter_tuning", "pruning"], "b": ["refactor"], "c": ["hyperparameter_tuning"],
          "d": ["hyperparameter_tuning"], "e": ["composition"]}
"""Judge answers by child; x's edit has none cached."""


def frozen_trace() -> Trace:
    cands, edges = [], []
    for i, (cid, parent, source, score) in enumerate(STEPS):
        cands.append({"candidate_id": cid, "kind": "artifact", "status": "confirmed", "iteration": i,
                      "parent_ids": [parent] if parent else [], "source": source, "val_mean": score,
                      "created_at": float(i)})
        if parent:
            edges.append({"parent_id": parent, "child_id": cid, "operator": "mutate", "generation_mode": "diff"})
    return Trace(run={"run_id": "r20260101-120000-abcd", "task": "t", "status": "running", "created_at": 0.0},
                 candidates=cands, edges=edges)


def frozen_analysis() -> RunAnalysis:
    trace = frozen_trace()
    cached = {e.key: LABELS[e.child_id] for e in edits.edits_of(trace, MODEL) if e.child_id in LABELS}
    return summarise(trace, cached, MODEL)


class AnalysisBackend(FrozenBackend):
    """The frozen dashboard data with an analysis of the hand-made lineage."""

    def __init__(self) -> None:
        super().__init__()
        self.analysis_calls = 0

    async def analysis(self) -> RunAnalysis | None:
        self.analysis_calls += 1
        return frozen_analysis()


class CyclingBackend(AnalysisBackend):
    """The hand-made lineage as program artifacts, for the lineage's recycled-lines line."""

    def artifacts(self) -> list[ArtifactView]:
        return [ArtifactView(cid, parent, i + 1, "seed" if parent is None else "confirmed", score, source,
                             meta={"metrics": {"score": score}}) for i, (cid, parent, source, score) in enumerate(STEPS)]


async def open_analysis(pilot):
    """Press 5 and wait for the analysis worker; the screen it opened."""
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.press("5")
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return pilot.app.screen
