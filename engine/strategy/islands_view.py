"""A read-only, immutable view of a run's island archive (loongflow, or contextevolve with
`selection = "islands"`), for observers such as the TUI's islands screen.

The archive is rebuilt from the artifacts by the same deterministic fold the run's selector uses
(engine/selection/islands.py), so the view equals the live run's islands without reaching into
the selector. Callers cache it by pool version: the fold costs time linear in the artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from engine.pool import Artifact

ISLAND_KEYS = ("islands", "migration_interval", "migration_share", "bins", "population_cap",
               "migration_threshold", "migration_trigger")


@dataclass(frozen=True)
class IslandCell:
    x: int
    """Text-length bin."""
    y: int
    """Novelty (programs) or coverage (per-instance scores) bin."""
    artifact_id: str
    score: float | None


@dataclass(frozen=True)
class IslandView:
    index: int
    best_id: str | None
    best_score: float | None
    size: int
    bins: int
    cells: tuple[IslandCell, ...]
    temperature: float
    """The adaptive Boltzmann temperature the selector would use now."""
    stagnant_for: int
    """Artifacts folded in since the island's best last rose."""


@dataclass(frozen=True)
class Migration:
    artifact_id: str
    from_island: int
    to_island: int
    version: int
    """The migrant's commit version (the migration itself happened at a later commit)."""


@dataclass(frozen=True)
class GridAxis:
    """A grid dimension as the islands screen labels it."""

    name: str
    detail: str
    """What is binned and how, e.g. "min_radius 0..0.01" or "min-max over the island"."""
    bins: int | None
    """Bins of a declared axis; None for a default axis (the island's bins, both ways)."""


def grid_axes(descriptors: Any, feature: str) -> tuple[GridAxis, GridAxis]:
    """(across, up): the run's declared [[descriptor]] axes (a single one leaves "up" at one bin),
    else text length and the feature (novelty or coverage), min-max scaled over each island."""
    if descriptors is None:
        return (GridAxis("length", "text length, min-max over the island", None),
                GridAxis(feature, f"{feature}, min-max over the island", None))
    axes = [GridAxis(a.name, f"{a.metric} {a.lo:g}..{a.hi:g}", a.bins) for a in descriptors.axes]
    return axes[0], axes[1] if len(axes) > 1 else GridAxis("-", "no second axis declared", 1)


@dataclass(frozen=True)
class IslandsView:
    islands: tuple[IslandView, ...]
    migrations: tuple[Migration, ...]
    """Every current membership by migration, oldest migrant first."""
    folded: int
    """Live artifacts folded in."""
    migration_interval: int
    feature: str
    """The grid's second dimension: "novelty" or "coverage"."""
    events: tuple = ()
    """Every migration the fold made (engine/selection/island_migration.py MigrationEvent), oldest
    first: when, between which islands, both diversities and the migrants."""
    axes: tuple[GridAxis, GridAxis] | None = None
    """The grid's (across, up) axes (grid_axes); None: the default ones."""
    migration_trigger: str = "diversity"
    migration_threshold: float = 0.1

    @property
    def next_migration_in(self) -> int:
        return self.migration_interval - self.folded % self.migration_interval


def island_options(strategy: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The [strategy.loongflow] options when the strategy runs islands, else None.
    `strategy` is the run config's strategy table (name, loongflow, contextevolve)."""
    from engine.strategy.registry import island_options as declared
    from engine.config.strategy import upgrade_stored_strategy

    return declared(upgrade_stored_strategy(strategy))  # each strategy says whether it runs islands


def build_islands_view(strategy: Mapping[str, Any], artifacts: Iterable[Artifact],
                       descriptors: Any = None) -> IslandsView | None:
    """The islands of a run whose strategy uses them (None for any other strategy). `descriptors`:
    the task's declared grid axes (engine/strategy/descriptors.py Descriptors), as the run's fold
    uses them; None: the default axes."""
    options = island_options(strategy)
    if options is None:
        return None
    from engine.selection.islands import IslandArchive, IslandSettings
    from engine.strategy.boltzmann import island_tau
    from engine.strategy.loongflow import LoongFlowOptions

    opts = LoongFlowOptions(**options)
    settings = IslandSettings(*(getattr(opts, k) for k in ISLAND_KEYS), descriptors=descriptors)
    archive = IslandArchive(settings, artifacts)
    state = archive.state()
    views, migrations = [], []
    per_instance = True
    for i in range(len(archive)):
        members = archive.members(i)
        grid = archive.grid(i)
        scores = {a.artifact_id: a.val_mean for a in members}
        versions = {a.artifact_id: a.created_version for a in members}
        # The grid's second feature is coverage only when every member has one (as in _build_grid).
        per_instance = per_instance and all(archive.traits(a.artifact_id).coverage is not None for a in members)
        cells = tuple(IslandCell(x, y, aid, scores.get(aid)) for (x, y), aid in sorted(grid.elites.items()))
        views.append(IslandView(i, members[0].artifact_id if members else None,
                                members[0].val_mean if members else None, len(members), grid.bins, cells,
                                round(island_tau(archive, i, opts.temperature_rule, opts.tau_base), 4),
                                archive.stagnant_for(i)))
        for aid, membership in state["islands"][i]["members"].items():
            if membership.migrated_from is not None:
                migrations.append(Migration(aid, membership.migrated_from, i, versions.get(aid, 0)))
    migrations.sort(key=lambda m: (m.version, m.artifact_id, m.from_island, m.to_island))
    feature = "coverage" if per_instance else "novelty"
    return IslandsView(tuple(views), tuple(migrations), state["count"], settings.migration_interval, feature,
                       tuple(archive.migration_log()), grid_axes(descriptors, feature),
                       settings.migration_trigger, settings.migration_threshold)
