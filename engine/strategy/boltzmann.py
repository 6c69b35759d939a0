"""LoongFlow's parent selection: adaptive Boltzmann selection within an island.

P(s) ∝ exp((R(s) − R_max) / τ) over the island's MAP-Elites elites, R min-max normalised within
the island (so τ means the same on every task's score scale; subtracting R_max only keeps exp()
in range). τ follows the island's diversity by one of two rules:

- "paper" (LoongFlow, Algorithm 1 line 10): τ = τ_base · (1 + α·e^(−β·H)), H the Shannon entropy
  (nats) of the island's members over its grid cells, α = β = 1 (the paper gives no values): a
  converged island (H = 0) runs at 2·τ_base and explores, a spread one approaches τ_base.
- "released_code" (LoongFlow's released code): D in [0, 1], the mean pairwise difference of the
  elites' length, line count and character set; τ_new = clip(τ_base·2D, 0.5, 2.0), then
  τ = 0.8·τ_new + 0.2·τ_base.

With `explore_prob` (doubled while the island has not improved its best over the last
`stagnation_k` commits) the parent is instead uniform over the island's members. The paper
specifies no update of sampling weights from child − parent deltas, so there is none.

Visit counts (LoongFlow Listing 1): each (island, cell) counts how often a parent was picked in it,
and an elite's Boltzmann weight is divided by 1 + its cell's visits, so less-visited cells are
preferred: weight = exp((R − R_max)/τ) / (1 + visits). The pick's tags carry the parent's cell
and the visits it had (stored on the child as meta["selection"]). With the default axes a cell is
a min-max bin that moves as the island grows; task-declared descriptors (descriptors.py) fix it.

The island: one that has nothing of its own yet, else the next in turn (round robin). The turn
and the visit counts are saved with the run state (KeepsState, engine/run/state.py), so a resumed run goes on with the
island the killed one would have taken; the islands themselves are rebuilt exactly from the pool
(engine/selection/islands.py).
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from engine.pool import Artifact
from engine.selection.islands import IslandArchive, IslandSettings, Traits
from engine.strategy.protocols import Archive, Pick

ALPHA = 1.0
BETA = 1.0
TEMPERATURE_RULES = ("paper", "released_code")


def archive_of(archive: Archive, settings: IslandSettings) -> IslandArchive:
    """The run's islands: one index per settings, kept current by the pool."""
    index = archive.index(("loongflow", settings), lambda arts: IslandArchive(settings, arts))
    assert isinstance(index, IslandArchive)
    return index


def boltzmann_probabilities(scores: Sequence[float], tau: float) -> list[float]:
    """P(i) ∝ exp((R_i − R_max)/τ), R the scores min-max normalised to [0, 1] (all equal: uniform)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    span = hi - lo
    norm = [(s - lo) / span if span > 0 else 1.0 for s in scores]
    weights = [math.exp((r - 1.0) / tau) for r in norm]
    total = sum(weights)
    return [w / total for w in weights]


def visit_weighted(probs: Sequence[float], visits: Sequence[int]) -> list[float]:
    """probs divided by 1 + each one's cell visits, renormalised (LoongFlow Listing 1)."""
    weights = [p / (1 + v) for p, v in zip(probs, visits)]
    total = sum(weights)
    return [w / total for w in weights] if total > 0 else list(probs)


def cell_key(island: int, cell: tuple[int, int]) -> str:
    return f"{island}:{cell[0]},{cell[1]}"


def paper_tau(tau_base: float, entropy: float) -> float:
    return tau_base * (1.0 + ALPHA * math.exp(-BETA * entropy))


def pairwise_diversity(traits: Sequence[Traits]) -> float:
    """Mean over pairs of the mean of three differences in [0, 1]: length, line count (relative
    to the larger) and character set (Jaccard distance). One artifact or none: 0."""
    pairs = list(itertools.combinations(traits, 2))
    if not pairs:
        return 0.0

    def rel(a: int, b: int) -> float:
        return abs(a - b) / max(a, b, 1)

    def charset(a: frozenset[str], b: frozenset[str]) -> float:
        union = len(a | b)
        return 1.0 - len(a & b) / union if union else 0.0

    total = sum((rel(a.length, b.length) + rel(a.lines, b.lines) + charset(a.charset, b.charset)) / 3
                for a, b in pairs)
    return total / len(pairs)


def released_code_tau(tau_base: float, diversity: float) -> float:
    tau_new = min(2.0, max(0.5, tau_base * 2.0 * diversity))
    return 0.8 * tau_new + 0.2 * tau_base


def island_tau(islands: IslandArchive, i: int, rule: str, tau_base: float) -> float:
    if rule == "released_code":
        return released_code_tau(tau_base, pairwise_diversity([islands.traits(a.artifact_id)
                                                               for a in islands.elites(i)]))
    return paper_tau(tau_base, islands.entropy(i))


@dataclass
class BoltzmannIslandSelector:
    """Picks an island, then a parent in it; the pick's tags carry the island (and τ)."""

    settings: IslandSettings
    temperature_rule: str = "paper"
    tau_base: float = 1.0
    explore_prob: float = 0.1
    stagnation_k: int = 10
    visit_counts: bool = True
    """Divide each elite's weight by 1 + its cell's visits (false: plain Boltzmann; visits are counted either way)."""
    name: str = "island round robin, adaptive Boltzmann over MAP-Elites elites (LoongFlow)"
    state_key: str = "loongflow.selector"
    _turn: int = field(default=0, repr=False)
    _visits: dict[str, int] = field(default_factory=dict, repr=False)
    """Parent picks per "island:x,y" cell."""
    _seed_checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.temperature_rule not in TEMPERATURE_RULES:
            raise ValueError(f"temperature_rule must be one of {', '.join(TEMPERATURE_RULES)}")

    def state(self) -> dict:
        return {"turn": self._turn, "visits": dict(self._visits)}

    def restore(self, state: Mapping[str, object]) -> None:
        self._turn = int(state.get("turn", 0))  # type: ignore[call-overload]
        visits = state.get("visits")
        self._visits = {str(k): int(v) for k, v in visits.items()} if isinstance(visits, Mapping) else {}

    def visits(self, island: int, cell: tuple[int, int]) -> int:
        return self._visits.get(cell_key(island, cell), 0)

    def _visit(self, island: int, cell: tuple[int, int]) -> int:
        """Count a pick in the cell; the visits it had before."""
        key = cell_key(island, cell)
        before = self._visits.get(key, 0)
        self._visits[key] = before + 1
        return before

    def _check_descriptors(self, archive: Archive) -> None:
        # A declared metric the seed's evaluation lacks is a task.toml mistake: say so at the first pick.
        if self._seed_checked or self.settings.descriptors is None:
            return
        seeds = [a for a in archive.live() if a.status == "seed"]
        for seed in seeds:
            self.settings.descriptors.check_seed(seed)
        self._seed_checked = bool(seeds)

    def island(self, islands: IslandArchive) -> int:
        turn, self._turn = self._turn, self._turn + 1
        empty = [i for i in range(len(islands)) if islands.own(i) == 0]
        pool = empty or list(range(len(islands)))
        return pool[turn % len(pool)]

    def explore_chance(self, islands: IslandArchive, i: int) -> float:
        if islands.stagnant_for(i) >= self.stagnation_k:
            return min(1.0, 2.0 * self.explore_prob)
        return self.explore_prob

    def pick(self, archive: Archive, instances: Sequence[str], rng: random.Random) -> Pick:
        self._check_descriptors(archive)
        islands = archive_of(archive, self.settings)
        i = self.island(islands)
        tau = island_tau(islands, i, self.temperature_rule, self.tau_base)
        members = islands.members(i)
        if not members:  # every member was removed: fall back on the whole pool's best
            best = archive.best() or archive.live()[0]
            return Pick(best.artifact_id, {"island": i})
        grid = islands.grid(i)
        if rng.random() < self.explore_chance(islands, i):
            parent = rng.choice(members)
        else:
            elites = islands.elites(i)
            probs = boltzmann_probabilities([a.val_mean for a in elites], tau)
            if self.visit_counts:
                probs = visit_weighted(probs, [self.visits(i, grid.cell_of[a.artifact_id]) for a in elites])
            parent = rng.choices(elites, weights=probs, k=1)[0]
        cell = grid.cell_of[parent.artifact_id]
        before = self._visit(i, cell)
        return Pick(parent.artifact_id, {"island": i, "tau": round(tau, 4), "cell": list(cell), "visits": before})

    def merge_weights(self, archive: Archive, instances: Sequence[str]) -> Mapping[str, int]:
        """Confirmed elites of every island, best first (loongflow offers no merges itself)."""
        islands = archive_of(archive, self.settings)
        elites = {a.artifact_id: a for i in range(len(islands)) for a in islands.elites(i)
                  if a.status in ("seed", "confirmed")}
        ranked = sorted(elites.values(), key=lambda a: (-a.val_mean, a.created_version))
        return {a.artifact_id: len(ranked) - rank for rank, a in enumerate(ranked)}


@dataclass(frozen=True)
class IslandElites:
    """The parent plus the top elites of its island (its home, else the first holding it)."""

    settings: IslandSettings
    count: int = 3
    name: str = "parent + its island's top elites"

    def inspirations(self, archive: Archive, parent: Artifact, rng: random.Random) -> list[Artifact]:
        islands = archive_of(archive, self.settings)
        held = islands.islands_of(parent.artifact_id)
        i = held[0] if held else islands.emptiest()
        return [a for a in islands.elites(i) if a.artifact_id != parent.artifact_id][: self.count]
