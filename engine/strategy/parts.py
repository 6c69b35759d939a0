"""Reusable strategy parts: selectors, context builders and acceptance rules."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from engine.pool import Artifact
from engine.selection.pareto import front_weights, sample_parent
from engine.strategy.protocols import Archive, Evidence, Pick


def _rank_key(a: Artifact) -> tuple[float, int]:
    return (-a.val_mean, a.created_version)


# -- parent selection -----------------------------------------------------------------------
@dataclass(frozen=True)
class ParetoSelector:
    """GEPA: a parent from the per-instance Pareto front, weighted by the fronts it is on. With
    one score per artifact (a program task) the front is the top scorers."""

    name: str = "Pareto front per instance (GEPA)"

    def pick(self, archive: Archive, instances: Sequence[str], rng: random.Random) -> Pick:
        return Pick(sample_parent(front_weights(archive, instances), rng))  # type: ignore[arg-type]

    def merge_weights(self, archive: Archive, instances: Sequence[str]) -> Mapping[str, int]:
        return front_weights(archive, instances, confirmed=True)  # type: ignore[arg-type]


@dataclass(frozen=True)
class TournamentSelector:
    """OpenEvolve-style: a tournament among the elite; with explore_prob any live artifact."""

    tournament_size: int
    elite_size: int
    explore_prob: float
    name: str = "elite tournament + exploration (OpenEvolve)"

    def pick(self, archive: Archive, instances: Sequence[str], rng: random.Random) -> Pick:
        arts = archive.live()
        if rng.random() < self.explore_prob:
            return Pick(rng.choice(arts).artifact_id)
        elite = sorted(arts, key=_rank_key)[: self.elite_size]
        entrants = rng.sample(elite, min(self.tournament_size, len(elite)))
        return Pick(max(entrants, key=lambda a: (a.val_mean, -a.created_version)).artifact_id)

    def merge_weights(self, archive: Archive, instances: Sequence[str]) -> Mapping[str, int]:
        elite = sorted(archive.confirmed(), key=_rank_key)[: self.elite_size]
        return {a.artifact_id: len(elite) - rank for rank, a in enumerate(elite)}


# -- context ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ParentOnly:
    """GEPA's reflective mutation: the parent and its own evidence (traces, evaluator feedback)."""

    name: str = "parent and its evidence"

    def inspirations(self, archive: Archive, parent: Artifact, rng: random.Random) -> list[Artifact]:
        return []


@dataclass(frozen=True)
class TopAndDiverse:
    """OpenEvolve's inspirations: the num_top best other artifacts and num_diverse random ones."""

    num_top: int
    num_diverse: int
    name: str = "parent + top and diverse inspirations"

    def inspirations(self, archive: Archive, parent: Artifact, rng: random.Random) -> list[Artifact]:
        rest = [a for a in archive.live() if a.artifact_id != parent.artifact_id]
        top = sorted(rest, key=_rank_key)[: self.num_top]
        others = [a for a in rest if a not in top]
        return [*top, *rng.sample(others, min(self.num_diverse, len(others)))]


# -- acceptance ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ParentGate:
    """GEPA: the candidate must beat its parent on the gate batch (a merge may tie: it unites
    two validated edits), then it is fully evaluated."""

    name: str = "beat the parent on a minibatch, then full validation (GEPA)"
    gated: bool = True

    def verdict(self, child: Evidence, parent: Evidence, *, tie_passes: bool) -> str | None:
        mine, theirs = child.total, parent.total
        if mine > theirs or (tie_passes and mine == theirs):
            return None
        return f"{mine:.2f} {'<' if tie_passes else '<='} parent {theirs:.2f}"


@dataclass(frozen=True)
class NoExampleWorse:
    """Per-example Pareto dominance: the candidate may lose no example its parent was scored on
    and must gain on one (a merge may gain on none). A sum that rises by trading one example for
    another is refused, so the gate keeps what the parent already solved."""

    name: str = "no example worse and one better than the parent (per-example Pareto dominance)"
    gated: bool = True

    def verdict(self, child: Evidence, parent: Evidence, *, tie_passes: bool) -> str | None:
        shared = [ex for ex in child.scores if ex in parent.scores]
        if not shared:
            return "no example scored on both sides"
        worse = [ex for ex in shared if child.scores[ex] < parent.scores[ex]]
        if worse:
            ex = worse[0]
            more = f" (and {len(worse) - 1} more)" if len(worse) > 1 else ""
            return f"example {ex} got worse: {child.scores[ex]:.2f} < parent {parent.scores[ex]:.2f}{more}"
        if tie_passes or any(child.scores[ex] > parent.scores[ex] for ex in shared):
            return None
        return f"no example better than the parent's ({len(shared)} equal)"


@dataclass(frozen=True)
class Population:
    """OpenEvolve: every candidate that evaluates is admitted with its score (the selector
    keeps the search on the good ones)."""

    name: str = "every evaluated candidate joins the population (OpenEvolve)"
    gated: bool = False

    def verdict(self, child: Evidence, parent: Evidence, *, tie_passes: bool) -> str | None:
        return None
