"""The immutable values a Backend hands the screens: a Frame (one engine snapshot, the LLM
stats and the plots' history), an artifact of the lineage view and a pending item's evidence,
with the helpers that fill them.

Separate from backend.py, which says where the data comes from (a run in this process): these
are what every backend yields, including attach.py's and the tests' frozen one. Nothing here
imports textual.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping

from engine.run.history import RunHistory
from engine.run.snapshot import EngineSnapshot


@dataclass(frozen=True)
class LLMStat:
    endpoint: str
    in_flight: int
    calls: int
    errors: int
    retries: int
    p50_s: float | None
    p95_s: float | None
    tokens_in: int
    tokens_out: int


@dataclass(frozen=True)
class ArtifactView:
    artifact_id: str
    parent_id: str | None
    version: int
    status: str
    score: float | None
    text: str
    note: str = ""
    """Review decision or other provenance, e.g. "edited at evaluate"."""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """The artifact's meta: strategy `notes`, `selection` tags, program `metrics`."""


@dataclass(frozen=True)
class ReviewEvidence:
    """What is known about a pending item beside its diff (empty where the item has no such data)."""

    child_mb: tuple[float, ...] = ()
    parent_mb: tuple[float, ...] = ()
    """Minibatch scores of the child and of its parent on the same examples (prompt tasks)."""
    child_score: float | None = None
    """Validation mean (prompt, after evaluation) or evaluated score (program)."""
    parent_score: float | None = None
    gaps: Mapping[str, int] = field(default_factory=dict)
    """Version gap at each stage the item entered."""
    staleness: tuple[str, ...] = ()
    """The staleness policy's decisions for it: "stage gap N -> decision: reason"."""
    notes: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, Any] = field(default_factory=dict)
    rationale: str = ""
    """The proposer's reasoning: its reply outside the code block (what it says it changed and why)."""


def provenance(meta: dict, parent_ids: list[str] | tuple[str, ...], review_note: str = "") -> str:
    """How an artifact came to be, for the lineage view: merge parents, a reflective rebase, a
    review decision."""
    parts = []
    if len(parent_ids) > 1:
        parts.append("merge of " + " + ".join(parent_ids))
    rebased = meta.get("rebased")
    if isinstance(rebased, dict):
        parts.append(_rebase_note(rebased))
    if review_note:
        parts.append(review_note)
    return " · ".join(parts)


def _rebase_note(rebased: dict) -> str:
    """A chain step's mechanical merge onto a newer head (from_seq/to_seq), or a reflective
    patch onto the best (from_version/to_version); a field the record lacks is left out."""
    parent = rebased.get("from_parent")
    if "from_seq" in rebased or "to_seq" in rebased:
        note = "merged onto the newer chain head" + (f" from {parent}" if parent else "")
        steps = (rebased.get("from_seq"), rebased.get("to_seq"))
        return note + (f" (head {steps[0]} -> {steps[1]})" if None not in steps else "")
    note = "patched" + (f" from {parent}" if parent else "")
    versions = (rebased.get("from_version"), rebased.get("to_version"))
    return note + (f" (v{versions[0]} -> v{versions[1]})" if None not in versions else "")


@dataclass(frozen=True)
class Frame:
    snap: EngineSnapshot
    llm: tuple[LLMStat, ...]
    decisions: tuple[str, ...]
    """Recent staleness / review decisions, newest last."""
    time_scale: float
    source: str
    can_control: bool
    finished: str = ""
    history: RunHistory | None = field(default=None, compare=False)
    """The plots' data; frames compare by `history_rev` and `history_now` instead."""
    history_rev: int = -1
    history_now: float = 0.0
    """Run time (s) where the plots' time axes end (held while paused or finished)."""
    paused_s: float = 0.0
    """Run seconds the view saw the run paused (counted when it resumes); rates leave them out."""
    spend: Mapping[str, Any] | None = None
    """SpendMeter.figures(): dollars and GPU-seconds in total and per stage, model and endpoint."""
    gpu: Mapping[str, Any] | None = None
    """GpuSlots.figures() when evaluations lease GPU slots ({"note": ...} when none were found)."""

    @property
    def sim_minutes(self) -> float:
        """Running time in (simulated) minutes: elapsed time less the pauses the view saw."""
        running = max(0.0, self.snap.elapsed_s - self.paused_s)
        return running * (self.time_scale if self.snap.simulated else 1.0) / 60.0

    @property
    def proposals_per_min(self) -> float:
        m = self.sim_minutes
        return self.snap.proposals / m if m > 0 else 0.0

    @property
    def acceptance(self) -> float | None:
        """Accepted over every proposal that reached a verdict, failures included (a program
        task accepts every candidate that evaluates, so only failures lower it)."""
        done = self.snap.accepted + self.snap.rejected + self.snap.failed
        return self.snap.accepted / done if done else None


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
