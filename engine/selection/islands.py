"""LoongFlow's archive: islands in a ring, each a MAP-Elites grid, as a derived index of the pool.

The pool stays the one flat store the ledger writes; this index is a deterministic fold over its
live artifacts in commit order (`created_version`), so a resumed run, whose pool is restored
from SQLite, rebuilds exactly the same islands, cells and memberships. What the fold does per
artifact:

- the seed is a member of every island (an island with nothing of its own selects it);
- any other artifact joins the island its parent was picked in (the selector's tag, which the
  committed child carries in meta["selection"]["island"]); without a usable tag, the emptiest;
- every `migration_interval` artifacts, along each ring edge whose islands' diversity differs by
  more than `migration_threshold`, the more diverse island's top `migration_share` of elites
  become members of the other (island_migration.py; nothing is copied: lineage is untouched; a
  migrant records where it came from, and the fold keeps a MigrationEvent per move);
- an island over `population_cap` evicts its worst non-elite (then its worst elite), never the
  global best. Evicted artifacts stay in the pool; they are only no longer selectable here.

The MAP-Elites grid of an island is recomputed from its members when read: the features are
text length and, for artifacts scored on one instance (programs), novelty (trigram distance to
the seed texts); for artifacts scored per instance (prompt tasks' validation examples), coverage
instead: the share of instances the artifact gets full marks on (a score >= 1, the prompt
metrics' range being [0, 1]), a behavioural descriptor where novelty would mostly repeat length
(a prompt grows by added rules). Both are min-max scaled over the island,
with `bins` per dimension (None: the integer square root of the island's size, at least 1); a
cell's elite is its best member (a tie keeps the older). Rescaling as the island grows moves
members between cells, so the grid is a view of the members rather than a store of its own.

Live updates: a new artifact is folded in at once; a change to a known artifact (a speculative
one confirmed, rescored or removed) replays the fold, on the next read, from the checkpoint
before it (one every CHECKPOINT_EVERY artifacts), which keeps the live index equal to one
rebuilt from the final states at a cost independent of the pool's size.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from engine.pool import Artifact, is_live
from engine.selection.island_migration import MigrationEvent, diversity, planned_moves


@dataclass(frozen=True)
class IslandSettings:
    islands: int = 3
    migration_interval: int = 10
    migration_share: float = 0.2
    bins: int | None = None
    population_cap: int = 30
    migration_threshold: float = 0.1
    migration_trigger: str = "diversity"
    """diversity: along edges whose diversity differs by over the threshold (the paper); interval:
    every island's elites to both neighbours every `migration_interval` commits."""
    descriptors: Any = None
    """Task-declared grid axes (engine/strategy/descriptors.py Descriptors: cell(art, length,
    novelty) on fixed ranges); None: length and novelty/coverage, min-max scaled over the island."""


@dataclass(frozen=True)
class Membership:
    """How an artifact is in an island: placed there (home), shared (a seed) or migrated."""

    home: bool
    migrated_from: int | None = None


@dataclass(frozen=True)
class Traits:
    """An artifact's raw features, fixed when it is first placed."""

    length: int
    lines: int
    charset: frozenset[str]
    novelty: float
    """Mean trigram (Jaccard) distance to the reference texts (the seeds) in [0, 1]."""
    coverage: float | None = None
    """Share of instances at full marks, for an artifact scored on several instances."""

    @property
    def behaviour(self) -> float:
        """The grid's second feature: coverage where there is one, else novelty."""
        return self.novelty if self.coverage is None else self.coverage


Cell = tuple[int, int]


@dataclass
class Island:
    index: int
    members: dict[str, Membership] = field(default_factory=dict)
    best: float | None = None
    improved_at: int = 0
    """The fold's artifact count when this island's best last rose (stagnation)."""
    evicted: int = 0


@dataclass(frozen=True)
class _Checkpoint:
    """The fold's state after its first `pos` artifacts (commit order)."""

    pos: int
    count: int
    best_id: str | None
    references: Mapping[str, frozenset[str]]
    islands: tuple[Island, ...]
    migrations: tuple[MigrationEvent, ...] = ()

    @staticmethod
    def initial(islands: int) -> _Checkpoint:
        return _Checkpoint(0, 0, None, {}, tuple(Island(i) for i in range(islands)))


CHECKPOINT_EVERY = 32
"""Artifacts between the fold's checkpoints: a speculative artifact confirmed or removed replays
at most this many plus those committed since it."""


@dataclass(frozen=True)
class Grid:
    cell_of: Mapping[str, Cell]
    elites: Mapping[Cell, str]
    bins: int


def rank_key(a: Artifact) -> tuple[float, int]:
    """Higher is better: the score, then the older artifact."""
    return (a.val_mean, -a.created_version)


def trigrams(text: str) -> frozenset[str]:
    return frozenset(text[i:i + 3] for i in range(max(1, len(text) - 2)))


def jaccard_distance(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return 1.0 - len(a & b) / union if union else 0.0


class IslandArchive:
    """The islands (a PoolIndex: `apply` takes each committed state of an artifact)."""

    def __init__(self, settings: IslandSettings, artifacts: Iterable[Artifact] = ()) -> None:
        self.settings = settings
        self._arts: dict[str, Artifact] = {}
        """Every artifact's latest state (members are read here; a change replays the fold
        from before it, so a state read during the fold is the one it was placed with)."""
        for art in artifacts:
            self._arts[art.artifact_id] = art
        self._order = sorted((a.created_version, a.artifact_id) for a in self._arts.values())
        self._trait_cache: dict[tuple[str, tuple[str, ...], str, int], Traits] = {}
        """Traits by (artifact, reference ids, status, instances scored), kept across replays (a
        speculative artifact rescored on its full validation set gets its traits anew)."""
        self._traits: dict[str, Traits] = {}
        self._checkpoints: dict[int, _Checkpoint] = {}
        self._dirty_from: int | None = None
        self._restore(_Checkpoint.initial(settings.islands))
        self._fold()

    # -- the fold ---------------------------------------------------------------------------
    def _restore(self, cp: _Checkpoint) -> None:
        self.islands = [Island(i.index, dict(i.members), i.best, i.improved_at, i.evicted) for i in cp.islands]
        self.count, self._best_id, self._pos = cp.count, cp.best_id, cp.pos
        """count: live artifacts folded in (what migration and stagnation count)."""
        self._references = dict(cp.references)
        self.migrations: list[MigrationEvent] = list(cp.migrations)
        self._grids: dict[int, Grid] = {}
        self._checkpoints = {p: c for p, c in self._checkpoints.items() if p <= cp.pos}
        self._checkpoints[cp.pos] = cp

    def _checkpoint(self) -> None:
        self._checkpoints[self._pos] = _Checkpoint(
            self._pos, self.count, self._best_id, dict(self._references),
            tuple(Island(i.index, dict(i.members), i.best, i.improved_at, i.evicted) for i in self.islands),
            tuple(self.migrations))

    def _fold(self) -> None:
        """Place the artifacts not folded in yet, in commit order."""
        while self._pos < len(self._order):
            self._place(self._arts[self._order[self._pos][1]])
            self._pos += 1
            if self._pos % CHECKPOINT_EVERY == 0:
                self._checkpoint()

    def apply(self, artifact: Artifact) -> None:
        aid = artifact.artifact_id
        known = aid in self._arts
        self._arts[aid] = artifact
        if not known:
            entry = (artifact.created_version, aid)
            if self._order and entry < self._order[-1]:
                bisect.insort(self._order, entry)
            else:
                self._order.append(entry)
        if known or self._dirty_from is not None or self._pos < len(self._order) - 1:
            # A changed state (a speculative artifact confirmed or removed): replay from the
            # checkpoint before it when next read.
            v = artifact.created_version
            self._dirty_from = v if self._dirty_from is None else min(self._dirty_from, v)
        else:
            self._fold()

    def _fresh(self) -> None:
        if self._dirty_from is None:
            return
        first = bisect.bisect_left(self._order, (self._dirty_from, ""))
        self._dirty_from = None
        self._restore(self._checkpoints[max(p for p in self._checkpoints if p <= first)])
        self._fold()

    def _place(self, art: Artifact) -> None:
        if not is_live(art):
            return
        aid = art.artifact_id
        self.count += 1
        if art.status == "seed" or not self._references:
            self._references[aid] = trigrams(art.text)
        key = (aid, tuple(self._references), art.status, len(art.val_scores))
        traits = self._trait_cache.get(key)
        if traits is None:
            traits = self._trait_cache[key] = self._traits_of(art)
        self._traits[aid] = traits
        if self._best_id is None or rank_key(art) > rank_key(self._arts[self._best_id]):
            self._best_id = aid
        if art.status == "seed":
            for island in self.islands:
                self._join(island, aid, Membership(home=False))
        else:
            self._join(self.islands[self._home_for(art)], aid, Membership(home=True))
        if self.count % self.settings.migration_interval == 0:
            self._migrate(art.created_version)

    def _traits_of(self, art: Artifact) -> Traits:
        grams = trigrams(art.text)
        refs = self._references.values()
        novelty = sum(jaccard_distance(grams, ref) for ref in refs) / len(refs)
        scores = list(art.val_scores.values())
        coverage = sum(1 for v in scores if v >= 1.0) / len(scores) if len(scores) > 1 else None
        return Traits(len(art.text), art.text.count("\n") + 1, frozenset(art.text), novelty, coverage)

    def _home_for(self, art: Artifact) -> int:
        selection = art.meta.get("selection")
        tag = selection.get("island") if isinstance(selection, Mapping) else None
        if isinstance(tag, int) and not isinstance(tag, bool) and 0 <= tag < len(self.islands):
            return tag
        return self.emptiest()

    def _join(self, island: Island, aid: str, membership: Membership) -> None:
        if aid in island.members:
            return
        island.members[aid] = membership
        self._grids.pop(island.index, None)
        score = self._arts[aid].val_mean
        if island.best is None or score > island.best:
            island.best, island.improved_at = score, self.count
        self._enforce_cap(island)

    def _enforce_cap(self, island: Island) -> None:
        while len(island.members) > self.settings.population_cap:
            elites = set(self._grid(island).elites.values())
            candidates = [a for a in island.members if a != self._best_id]
            if not candidates:
                return
            victim = min(candidates, key=lambda a: (a in elites, rank_key(self._arts[a])))
            del island.members[victim]
            island.evicted += 1
            self._grids.pop(island.index, None)

    def _migrate(self, version: int) -> None:
        n = len(self.islands)
        if n < 2:
            return
        # Diversities and migrants from a snapshot first, so the outcome does not depend on the
        # order islands move in.
        div = [self.diversity(i) for i in range(n)]
        outgoing = []
        for island in self.islands:
            elites = self._ranked(self._grid(island).elites.values())
            take = max(1, math.ceil(self.settings.migration_share * len(elites)))
            outgoing.append(elites[:take])
        moves = (planned_moves(div, self.settings.migration_threshold) if self.settings.migration_trigger == "diversity"
                 else [(i, j) for i in range(n) for j in dict.fromkeys(((i - 1) % n, (i + 1) % n))])
        for i, j in moves:
            moved = tuple(a.artifact_id for a in outgoing[i] if a.artifact_id not in self.islands[j].members)
            for aid in moved:
                self._join(self.islands[j], aid, Membership(home=False, migrated_from=i))
            self.migrations.append(MigrationEvent(self.count, i, j, round(div[i], 4), round(div[j], 4), moved, version))

    # -- the grid -----------------------------------------------------------------------------
    def _grid(self, island: Island) -> Grid:
        grid = self._grids.get(island.index)
        if grid is None:
            grid = self._grids[island.index] = self._build_grid(island)
        return grid

    def _build_grid(self, island: Island) -> Grid:
        ids = list(island.members)
        declared = self.settings.descriptors
        if declared is not None:
            return self._grid_of_cells({a: declared.cell(self._arts[a], self._traits[a].length, self._traits[a].novelty)
                                        for a in ids}, declared.bins)
        bins = self.settings.bins or max(1, math.isqrt(len(ids)))
        per_instance = all(self._traits[a].coverage is not None for a in ids)
        points = [(float(self._traits[a].length), self._traits[a].behaviour if per_instance else self._traits[a].novelty)
                  for a in ids]
        lows = [min((p[d] for p in points), default=0.0) for d in (0, 1)]
        highs = [max((p[d] for p in points), default=0.0) for d in (0, 1)]

        def coord(value: float, d: int) -> int:
            span = highs[d] - lows[d]
            return 0 if span <= 0 else min(bins - 1, int((value - lows[d]) / span * bins))

        return self._grid_of_cells({aid: (coord(x, 0), coord(y, 1)) for aid, (x, y) in zip(ids, points)}, bins)

    def _grid_of_cells(self, cell_of: dict[str, Cell], bins: int) -> Grid:
        elites: dict[Cell, str] = {}
        for aid, cell in cell_of.items():
            held = elites.get(cell)
            if held is None or rank_key(self._arts[aid]) > rank_key(self._arts[held]):
                elites[cell] = aid
        return Grid(cell_of, elites, bins)

    def _ranked(self, ids: Iterable[str]) -> list[Artifact]:
        return sorted((self._arts[a] for a in ids), key=rank_key, reverse=True)

    # -- reading --------------------------------------------------------------------------------
    def __len__(self) -> int:
        self._fresh()
        return len(self.islands)

    def own(self, i: int) -> int:
        """Members placed in island i (not seeds, not migrants)."""
        self._fresh()
        return sum(1 for m in self.islands[i].members.values() if m.home)

    def emptiest(self) -> int:
        """The island with the fewest members of its own (the lowest index on a tie)."""
        return min(range(len(self.islands)), key=lambda i: (self.own(i), i))

    def members(self, i: int) -> list[Artifact]:
        """Island i's members, best first."""
        self._fresh()
        return self._ranked(self.islands[i].members)

    def elites(self, i: int) -> list[Artifact]:
        """Island i's MAP-Elites archive (each occupied cell's best), best first."""
        self._fresh()
        return self._ranked(self._grid(self.islands[i]).elites.values())

    def grid(self, i: int) -> Grid:
        self._fresh()
        return self._grid(self.islands[i])

    def traits(self, artifact_id: str) -> Traits:
        self._fresh()
        return self._traits[artifact_id]

    def islands_of(self, artifact_id: str) -> list[int]:
        """The islands artifact_id is a member of, its home first."""
        self._fresh()
        held = [isl for isl in self.islands if artifact_id in isl.members]
        return [isl.index for isl in sorted(held, key=lambda isl: (not isl.members[artifact_id].home, isl.index))]

    def stagnant_for(self, i: int) -> int:
        """Artifacts folded in since island i's best last rose."""
        self._fresh()
        return self.count - self.islands[i].improved_at

    def entropy(self, i: int) -> float:
        """Shannon entropy (nats) of island i's members over its grid cells: 0 when every member
        shares one cell, ln(cells) when they are spread evenly."""
        grid = self.grid(i)
        counts: dict[Cell, int] = {}
        for cell in grid.cell_of.values():
            counts[cell] = counts.get(cell, 0) + 1
        total = sum(counts.values())
        return -sum(c / total * math.log(c / total) for c in counts.values()) if total else 0.0

    def diversity(self, i: int) -> float:
        """Island i's entropy over its cells normalised to [0, 1] (island_migration.py)."""
        self._fresh()
        counts: dict[Cell, int] = {}
        for cell in self._grid(self.islands[i]).cell_of.values():
            counts[cell] = counts.get(cell, 0) + 1
        return diversity(counts)

    def migration_log(self) -> list[MigrationEvent]:
        """Every migration the fold made, oldest first."""
        self._fresh()
        return list(self.migrations)

    @property
    def best_id(self) -> str | None:
        self._fresh()
        return self._best_id

    def state(self) -> dict:
        """Everything the fold decides, comparable with == (the resume property's tests)."""
        self._fresh()
        return {
            "count": self.count,
            "best": self._best_id,
            "migrations": list(self.migrations),
            "islands": [
                {"members": dict(isl.members), "best": isl.best, "improved_at": isl.improved_at,
                 "evicted": isl.evicted, "cells": dict(self._grid(isl).elites)}
                for isl in self.islands
            ],
        }
