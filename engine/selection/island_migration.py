"""When and where LoongFlow's elites migrate (§4.2.1: "Migration occurs only when the diversity
difference ΔD between neighbors exceeds a threshold. The top k elites are copied to adjacent
islands"; Algorithm 1 checks every M iterations).

Every `migration_interval` commits the fold (engine/selection/islands.py) measures each island's
diversity D, the Shannon entropy of its members over its MAP-Elites cells divided by ln(members)
(0 for a single member: a converged island; 1 when every member has a cell of its own), and looks
at each edge of the ring. Where |D_a − D_b| exceeds `migration_threshold` (the paper gives no
value; 0.1 here), the more diverse island's top `migration_share` of elites join the less diverse
one, the stagnating island getting the "invasive species". A threshold of 0 migrates along every
edge with any difference. Each migration is kept as a MigrationEvent: the commit count it happened
at, both islands' diversity and the migrants, so `evotui show` and the islands screen can say why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass(frozen=True)
class MigrationEvent:
    at: int
    """The fold's commit count when it happened."""
    source: int
    target: int
    source_diversity: float
    target_diversity: float
    artifact_ids: tuple[str, ...]
    """The migrants that were new to the target island."""
    version: int = 0
    """The pool version of the commit whose placement set the migration off."""

    @property
    def delta(self) -> float:
        return round(abs(self.source_diversity - self.target_diversity), 4)


def diversity(cell_counts: Mapping[object, int]) -> float:
    """Entropy of members over cells, normalised by ln(members) to [0, 1]."""
    total = sum(cell_counts.values())
    if total <= 1:
        return 0.0
    h = -sum(c / total * math.log(c / total) for c in cell_counts.values() if c)
    return min(1.0, max(0.0, h / math.log(total)))  # max: never -0.0


def ring_edges(n: int) -> list[tuple[int, int]]:
    """Each pair of ring neighbours once (two islands: one edge)."""
    if n < 2:
        return []
    return list(dict.fromkeys(tuple(sorted((i, (i + 1) % n))) for i in range(n)))  # type: ignore[misc]


def planned_moves(diversities: Sequence[float], threshold: float) -> list[tuple[int, int]]:
    """(source, target) per ring edge whose diversity difference exceeds the threshold, from the
    more diverse island to the less diverse one."""
    moves = []
    for a, b in ring_edges(len(diversities)):
        da, db = diversities[a], diversities[b]
        if abs(da - db) > threshold:
            moves.append((a, b) if da > db else (b, a))
    return moves
