"""ContextEvolve's evolve buffer: parent -> child transitions, derived from the pool.

Every committed child names its parent, carries its score vector and, once the Summarizer ran,
meta["notes"]["summary"]; the Navigator's guidance and the pool version it was made from ride in
the same notes. So the buffer is a pool index (engine/pool.py: `Pool.index`), rebuilt exactly from
the stored pool on resume, never state of its own.

Failed candidates: a candidate that evaluates but scores below its parent is committed (the
strategy admits every evaluated candidate) and is a "decline" transition here. A candidate that
never got a score (its patch did not apply, a filter or the syntax check refused it, the
evaluator crashed) never reaches the pool; the kind tells the strategy when such an item ends
(Strategy.item_ended) and a `FailureLog` keeps it, as a transition labelled "failed" with the
failure's reason. The log is rebuilt on resume from the stored item rows (the seam replays them),
and its order is (version, item id), never arrival order, so the rebuilt log equals the live one.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

from engine.pool import Artifact
from engine.strategy.protocols import Archive, EndedItem

Category = Literal["improvement", "mixed", "decline", "failed"]
CATEGORIES: tuple[Category, ...] = ("improvement", "mixed", "decline", "failed")
CALL_FAILURES = ("LLM error", "truncated")
"""How the kinds' failure reasons start when the proposer's call failed or was cut: no candidate
to learn from, so such items stay out of the log."""


def notes_of(artifact: Artifact) -> Mapping[str, str]:
    notes = artifact.meta.get("notes")
    return notes if isinstance(notes, Mapping) else {}


def summary_of(artifact: Artifact) -> str:
    return str(notes_of(artifact).get("summary", ""))


def diff_digest(artifact: Artifact, chars: int = 240) -> str:
    """A few changed lines of the artifact's own diff (meta["diff"]), for an unsummarised child."""
    diff = str(artifact.meta.get("diff") or "")
    lines = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    text = " | ".join(ln.strip() for ln in lines[:6])
    return text[:chars]


def category(parent: Mapping[str, float], child: Mapping[str, float]) -> Category:
    """On the score vector: all shared scores up or equal and one up -> improvement; all down or
    equal and one down -> decline; anything else (ties, some up and some down) -> mixed."""
    keys = [k for k in child if k in parent] or list(child)
    ups = sum(child[k] > parent.get(k, 0.0) for k in keys)
    downs = sum(child[k] < parent.get(k, 0.0) for k in keys)
    if ups and not downs:
        return "improvement"
    if downs and not ups:
        return "decline"
    return "mixed"


@dataclass(frozen=True)
class Transition:
    parent_id: str
    child_id: str
    parent_score: float
    child_score: float
    category: Category
    parent_summary: str
    child_summary: str
    """The child's summary, else a digest of its diff (marked as such)."""
    created_version: int
    failure: str = ""
    """Why a failed candidate never got a score ("" for a scored child; then child_score is the
    parent's, delta 0)."""

    @property
    def delta(self) -> float:
        return self.child_score - self.parent_score


@dataclass(frozen=True)
class SharedGuidance:
    version: int
    text: str


class EvolveBuffer:
    """A pool index (`apply` takes each committed state of an artifact)."""

    def __init__(self, artifacts: Iterable[Artifact] = ()) -> None:
        self._arts: dict[str, Artifact] = {}
        self.guidance: SharedGuidance | None = None
        """The newest guidance a committed child carries (by the version it was made from)."""
        for art in artifacts:
            self.apply(art)

    def apply(self, artifact: Artifact) -> None:
        self._arts[artifact.artifact_id] = artifact
        notes = notes_of(artifact)
        text, version = notes.get("guidance"), notes.get("guidance_version")
        if text and version is not None and str(version).lstrip("-").isdigit():
            found = SharedGuidance(int(version), str(text))
            if self.guidance is None or (found.version, found.text) > (self.guidance.version, self.guidance.text):
                self.guidance = found

    def artifacts(self) -> list[Artifact]:
        return list(self._arts.values())

    def get(self, artifact_id: str) -> Artifact | None:
        return self._arts.get(artifact_id)

    def transitions(self) -> list[Transition]:
        """Every committed child with a known parent, oldest first."""
        out = []
        for art in sorted(self._arts.values(), key=lambda a: (a.created_version, a.artifact_id)):
            parent = self._arts.get(art.parent_ids[0]) if art.parent_ids else None
            if parent is None:
                continue
            child_summary = summary_of(art) or (f"(unsummarised change) {diff_digest(art)}".strip())
            out.append(Transition(parent.artifact_id, art.artifact_id, parent.val_mean, art.val_mean,
                                  category(parent.val_scores, art.val_scores), summary_of(parent), child_summary,
                                  art.created_version))
        return out


def is_failed_candidate(ended: EndedItem) -> bool:
    """A proposal (not a merge) whose candidate never got a score for a reason of its own."""
    if ended.merge or ended.outcome != "failed" or not ended.reason:
        return False
    return not ended.reason.startswith(CALL_FAILURES)


class FailureLog:
    """Failed candidates, by item id (idempotent: the live hook and the resume replay may both
    tell the same item)."""

    def __init__(self) -> None:
        self._items: dict[str, EndedItem] = {}

    def add(self, ended: EndedItem) -> None:
        if is_failed_candidate(ended):
            self._items[ended.item_id] = ended

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[EndedItem]:
        return sorted(self._items.values(), key=lambda e: (e.created_version, e.item_id))

    def transitions(self, buf: "EvolveBuffer") -> list[Transition]:
        """Each failure whose parent is in the buffer, as a "failed" transition."""
        out = []
        for e in self.items():
            parent = buf.get(e.parent_id)
            if parent is None:
                continue
            digest = " | ".join(ln.strip() for ln in (e.diff or "").splitlines()
                                if ln[:1] in "+-" and not ln.startswith(("+++", "---")))[:240]
            out.append(Transition(parent.artifact_id, e.item_id, parent.val_mean, parent.val_mean, "failed",
                                  summary_of(parent), f"(failed) {digest}".strip() if digest else "(failed, no diff)",
                                  e.created_version, failure=e.reason[:300]))
        return out


def buffer_of(archive: Archive) -> EvolveBuffer:
    index = archive.index(("contextevolve", "buffer"), EvolveBuffer)
    assert isinstance(index, EvolveBuffer)
    return index


def sample_by_category(transitions: Sequence[Transition], m: int, weights: Mapping[str, float],
                       rng: random.Random) -> list[Transition]:
    """m transitions, categories drawn by `weights` (renormalised over the non-empty ones), without
    repeats; one decline and one failed candidate are always among them when the buffer has any
    (a failure has no weight of its own: after its reserved place it only fills a short sample)."""
    by_cat: dict[str, list[Transition]] = {c: [t for t in transitions if t.category == c] for c in CATEGORIES}
    picked: list[Transition] = []
    for reserved in ("decline", "failed"):
        if len(picked) < m and by_cat[reserved]:
            picked.append(by_cat[reserved].pop(rng.randrange(len(by_cat[reserved]))))
    while len(picked) < m:
        cats = [c for c in CATEGORIES if by_cat[c] and weights.get(c, 0.0) > 0 and c != "failed"]
        if not cats:
            # Zero-weight categories (and failures) still fill the sample rather than leaving it short.
            cats = [c for c in CATEGORIES if by_cat[c]]
            if not cats:
                break
            chosen = cats[0]
        else:
            chosen = rng.choices(cats, weights=[weights[c] for c in cats])[0]
        pool = by_cat[chosen]
        picked.append(pool.pop(rng.randrange(len(pool))))
    return sorted(picked, key=lambda t: (t.created_version, t.child_id))


_WORD = re.compile(r"\S+")


def short(text: str, words: int) -> str:
    found = _WORD.findall(text)
    return " ".join(found[:words]) + (" …" if len(found) > words else "")
