"""LoongFlow's diversity-triggered migration (engine/selection/island_migration.py): elites move
only along ring edges whose diversity differs by more than the threshold, from the more diverse
island to the less diverse one; each move is a MigrationEvent the views and `evotui show` read."""

from __future__ import annotations

import math

import pytest

from engine.strategy.islands_view import build_islands_view
from engine.selection.island_migration import MigrationEvent, diversity, planned_moves, ring_edges
from engine.selection.islands import IslandSettings, Membership
from engine.strategy.loongflow import LoongFlowOptions
from tests.engine.test_loongflow import add, seeded


def test_diversity_is_normalised_cell_entropy() -> None:
    assert diversity({}) == 0.0 and diversity({(0, 0): 1}) == 0.0
    assert diversity({(0, 0): 4}) == 0.0  # converged: every member in one cell
    assert diversity({(0, 0): 1, (1, 0): 1, (0, 1): 1}) == pytest.approx(1.0)  # a cell each
    two_cells = -2 * 0.5 * math.log(0.5) / math.log(4)
    assert diversity({(0, 0): 2, (1, 1): 2}) == pytest.approx(two_cells)


def test_moves_follow_the_threshold_from_more_to_less_diverse() -> None:
    assert ring_edges(1) == [] and ring_edges(2) == [(0, 1)] and ring_edges(3) == [(0, 1), (1, 2), (0, 2)]
    assert planned_moves([0.9, 0.1, 0.85], 0.5) == [(0, 1), (2, 1)]  # 0-2 differ by 0.05 only
    assert planned_moves([0.9, 0.1, 0.85], 0.9) == []
    assert planned_moves([0.3, 0.3], 0.0) == []  # no difference, no migration


def _grow(pool, spread_island: int, flat_island: int, n: int) -> None:
    """spread_island gets texts of very different lengths (many cells), flat_island one text."""
    for k in range(n):
        add(pool, f"s{k}", 0.2 + k / 100, text="x" * (10 + 40 * k), island=spread_island)
        add(pool, f"f{k}", 0.3 + k / 100, text="abcabc", island=flat_island)


def test_a_diverse_island_sends_its_elites_to_a_converged_neighbour_and_the_move_is_recorded() -> None:
    pool, islands = seeded(IslandSettings(islands=2, migration_interval=9, migration_share=0.5, bins=3,
                                          migration_threshold=0.2))
    _grow(pool, spread_island=0, flat_island=1, n=4)  # 1 seed + 8: the ninth commit checks
    log = islands.migration_log()
    assert len(log) == 1
    event = log[0]
    assert (event.at, event.source, event.target) == (9, 0, 1)
    assert event.source_diversity > 0.5 and event.target_diversity < 0.3 and event.delta > 0.2
    assert event.artifact_ids and all(islands.islands[1].members[a] == Membership(home=False, migrated_from=0)
                                      for a in event.artifact_ids)
    assert not any(m.migrated_from == 1 for m in islands.islands[0].members.values())  # one way only


def test_no_migration_below_the_threshold_and_interval_keeps_both_neighbours() -> None:
    pool, islands = seeded(IslandSettings(islands=2, migration_interval=9, bins=3, migration_threshold=0.99))
    _grow(pool, 0, 1, 4)
    assert islands.migration_log() == []
    pool, islands = seeded(IslandSettings(islands=2, migration_interval=9, bins=3, migration_trigger="interval"))
    _grow(pool, 0, 1, 4)
    assert [(e.source, e.target) for e in islands.migration_log()] == [(0, 1), (1, 0)]


def test_the_view_carries_the_events_with_the_configured_threshold() -> None:
    pool, _ = seeded(IslandSettings())
    _grow(pool, 0, 1, 4)
    strategy = {"name": "loongflow", "loongflow": {"islands": 2, "migration_interval": 9, "migration_share": 0.5,
                                                   "bins": 3, "migration_threshold": 0.2,
                                                   "migration_trigger": "diversity"}}
    view = build_islands_view(strategy, pool.artifacts())
    assert view is not None and [(e.at, e.source, e.target) for e in view.events] == [(9, 0, 1)]
    assert isinstance(view.events[0], MigrationEvent)
    strategy["loongflow"]["migration_threshold"] = 0.99
    assert build_islands_view(strategy, pool.artifacts()).events == ()


def test_the_paper_trigger_is_the_default_and_bad_values_are_refused() -> None:
    cfg = LoongFlowOptions()
    assert (cfg.migration_trigger, cfg.migration_threshold) == ("diversity", 0.1)
    with pytest.raises(ValueError, match="migration_threshold"):
        LoongFlowOptions(migration_threshold=1.5)
    with pytest.raises(ValueError, match="migration_trigger"):
        LoongFlowOptions(migration_trigger="sometimes")
