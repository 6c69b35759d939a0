"""The live cycling guard (issue 14 item 6): a child that re-adds lines its own lineage deleted.

The lineage is the chain of first parents, as in the offline detector
(engine/trace/analyze/cycling.py); both count with engine/code/deleted_lines.py. An artifact's
deletion history is its parent's plus the lines the parent -> artifact edit removed, so it is
built once per artifact id and cached: checking a child costs one diff against its parent.

Guard settings ([program] cycling_guard): off (nothing computed), warn (counted and noted in the
child's meta), penalise (score x (1 - cycling_penalty x recycled share)), reject (the child fails
at validate as "filter cycling").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.code.deleted_lines import CLASSES, Memory, counts, line_changes, normalise

GUARDS = ("off", "warn", "penalise", "reject")
RECENT_KEPT = 48
"""Most recent deletions kept per artifact for the prompt (the prompt shows fewer)."""
NOTED_LINES = 5
"""Recycled lines written into a child's meta."""

Lineage = Callable[[str], tuple[str, tuple[str, ...]] | None]
"""artifact id -> (program text, parent ids), or None when the id is unknown."""


@dataclass(frozen=True)
class History:
    """What an artifact's lineage deleted: the memory the check uses, and the recent deletions
    (normalised, newest first, no repeats) the proposer is shown."""

    memory: Memory = field(default_factory=Memory)
    recent: tuple[str, ...] = ()

    def plus(self, removed: list[str]) -> History:
        fresh = [normalise(ln) for ln in removed if counts(ln)]  # in file order
        if not fresh:
            return self
        recent = tuple(dict.fromkeys([*fresh, *self.recent]))[:RECENT_KEPT]
        return History(self.memory.plus(removed), recent)


@dataclass(frozen=True)
class Recycled:
    """The recycled lines of one child: how many it added (counted lines), which came back."""

    added: int
    lines: tuple[tuple[str, str], ...] = ()
    """(normalised line, class) per recycled added line."""

    @property
    def count(self) -> int:
        return len(self.lines)

    @property
    def share(self) -> float:
        return self.count / self.added if self.added else 0.0

    def by_class(self) -> dict[str, int]:
        c = Counter(kind for _, kind in self.lines)
        return {k: c[k] for k in CLASSES}

    def meta(self) -> dict:
        """The child's meta entry `recycled_lines`."""
        return {"count": self.count, "added": self.added, "share": round(self.share, 4),
                "by_class": self.by_class(), "lines": [ln for ln, _ in self.lines[:NOTED_LINES]]}


def recycled(memory: Memory, parent: str, child: str) -> Recycled:
    """The lines the parent -> child edit adds that the memory (the parent's lineage) deleted."""
    added, _ = line_changes(parent, child)
    eligible = [ln for ln in added if counts(ln)]
    found = tuple((normalise(ln), kind) for ln in eligible if (kind := memory.classify(ln)))
    return Recycled(len(eligible), found)


def penalised(score: float, share: float, penalty: float) -> float:
    """score x (1 - penalty x share); on a negative score the same fraction of |score| is taken
    off, so a penalty never raises a score."""
    return score - abs(score) * penalty * share


class LineageHistory:
    """Deletion histories per artifact id, built lazily along first parents and cached."""

    def __init__(self, lineage: Lineage) -> None:
        self.lineage = lineage
        self.cache: dict[str, History] = {}

    def of(self, artifact_id: str) -> History:
        # Walk up to the nearest cached (or root) ancestor, then build down: no recursion, so a
        # deep lineage cannot exhaust the stack.
        chain: list[tuple[str, str, str]] = []  # (id, parent id, own text)
        node = artifact_id
        while node not in self.cache:
            found = self.lineage(node)
            if found is None or not found[1] or self.lineage(found[1][0]) is None:
                self.cache[node] = History()
                break
            chain.append((node, found[1][0], found[0]))
            node = found[1][0]
        for aid, parent_id, text in reversed(chain):
            parent = self.lineage(parent_id)
            assert parent is not None  # checked on the way up
            _, removed = line_changes(parent[0], text)
            self.cache[aid] = self.cache[parent_id].plus(removed)
        return self.cache[artifact_id]

    def check(self, parent_id: str, parent_text: str, child: str) -> Recycled:
        return recycled(self.of(parent_id).memory, parent_text, child)

    def removed_lines(self, artifact_id: str, text: str, limit: int) -> list[str]:
        """Up to limit recent deletions of the lineage that the program does not contain now."""
        present = {normalise(ln) for ln in text.splitlines()}
        return [ln for ln in self.of(artifact_id).recent if ln not in present][:limit]
