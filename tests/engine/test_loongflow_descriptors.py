"""LoongFlow's task-declared behavioural descriptors and visit counts: [[descriptor]] parsing and
its errors, fixed-range binning of evaluator metrics and built-ins into the islands' grid cells,
visit-weighted parent sampling (weight / (1 + visits)), and visit counts surviving a state save
and restore."""

from __future__ import annotations

import random
import shutil
from collections import Counter
from pathlib import Path

import pytest

from engine.pool import Artifact, Pool
from engine.run.state import RunState, part_states, restore_part_states, stateful_parts
from engine.selection.islands import IslandSettings
from engine.strategy import build
from engine.strategy.boltzmann import BoltzmannIslandSelector, archive_of, visit_weighted
from engine.strategy.descriptors import Axis, DescriptorError, Descriptors, parse_descriptors
from engine.strategy.protocols import SearchParams
from engine.tasks.program_task import load_program_task
from engine.tasks.prompt_task import TaskError

ROOT = Path(__file__).resolve().parents[2]
RADIUS = {"name": "smallest circle", "metric": "min_radius", "range": [0.0, 0.1], "bins": 4}
LENGTH = {"name": "size", "metric": "length", "range": [0, 100], "bins": 2}


def art(aid: str, score: float, metrics: dict | None = None, *, text: str = "abcabc", status: str = "confirmed",
        island: int | None = None) -> Artifact:
    meta: dict = {"metrics": metrics} if metrics is not None else {}
    if island is not None:
        meta["selection"] = {"island": island}
    parents = () if status == "seed" else ("seed",)
    return Artifact(aid, text, parents, 0, {"score": score}, status=status, meta=meta)


# -- parsing ------------------------------------------------------------------------------------
def test_declared_axes_are_parsed_in_order() -> None:
    d = parse_descriptors([RADIUS, LENGTH], "t/task.toml")
    assert d == Descriptors((Axis("smallest circle", "min_radius", 0.0, 0.1, 4), Axis("size", "length", 0.0, 100.0, 2)),
                            "t/task.toml")
    assert d.bins == 4
    assert parse_descriptors(None) is None and parse_descriptors([]) is None


@pytest.mark.parametrize("table, key", [
    ({**RADIUS, "bins": 0}, "bins"),
    ({**RADIUS, "range": [0.5, 0.5]}, "lo < hi"),
    ({**RADIUS, "range": [0.1]}, "range"),
    ({**RADIUS, "colour": "red"}, "colour"),
    ({k: v for k, v in RADIUS.items() if k != "metric"}, "metric"),
])
def test_a_bad_descriptor_names_task_toml_and_the_key(table: dict, key: str) -> None:
    with pytest.raises(DescriptorError) as err:
        parse_descriptors([table], "t/task.toml")
    message = str(err.value)
    assert message.startswith("t/task.toml: [[descriptor]] #1") and key in message and "\n" not in message
    assert err.value.exit_code == 2


def test_more_than_two_axes_or_a_non_table_is_refused() -> None:
    with pytest.raises(DescriptorError, match="at most 2"):
        parse_descriptors([RADIUS, LENGTH, RADIUS])
    with pytest.raises(DescriptorError, match="array of tables"):
        parse_descriptors({"metric": "x"})


def test_the_loader_reads_descriptor_tables_and_refuses_bad_ones(tmp_path: Path) -> None:
    folder = tmp_path / "cp"
    shutil.copytree(ROOT / "tasks" / "circle_packing", folder)
    toml = folder / "task.toml"
    plain = toml.read_text()
    assert load_program_task(folder).descriptors is None  # none declared: the default axes
    toml.write_text(plain + '\n[[descriptor]]\nname = "r"\nmetric = "min_radius"\nrange = [0.0, 0.1]\nbins = 5\n')
    assert load_program_task(folder).descriptors.axes == (Axis("r", "min_radius", 0.0, 0.1, 5),)
    toml.write_text(plain + '\n[[descriptor]]\nname = "r"\nmetric = "min_radius"\nrange = [0.2, 0.1]\nbins = 5\n')
    with pytest.raises(TaskError) as err:
        load_program_task(folder)
    assert str(toml) in str(err.value) and "range" in str(err.value)


# -- binning and grid cells ---------------------------------------------------------------------
def test_axis_bins_over_the_declared_range_clamped_at_the_ends() -> None:
    axis = Axis("r", "min_radius", 0.0, 0.1, 4)
    assert [axis.bin(v) for v in (0.0, 0.024, 0.025, 0.074, 0.099, 0.1, 0.5, -1.0, None)] == [0, 0, 1, 2, 3, 3, 3, 0, 0]
    d = Descriptors((axis,))
    assert d.cell(art("a", 1.0, {"min_radius": 0.06}), 10, 0.5) == (2, 0)  # one axis: y is 0
    two = Descriptors((Axis("n", "novelty", 0.0, 1.0, 2), Axis("l", "length", 0, 100, 2)))
    assert two.cell(art("a", 1.0), 80, 0.3) == (0, 1)


def test_island_cells_follow_the_declared_metric() -> None:
    settings = IslandSettings(islands=1, migration_interval=100, descriptors=parse_descriptors([RADIUS, LENGTH]))
    pool = Pool()
    islands = archive_of(pool, settings)
    pool.add(art("seed", 0.1, {"min_radius": 0.01}, status="seed"))
    pool.add(art("a", 0.5, {"min_radius": 0.08}, text="x" * 70))
    pool.add(art("b", 0.4, {"min_radius": 0.085}, text="y" * 75))  # a's cell, worse: not the elite
    pool.add(art("c", 0.3, {"score": 0.3}))  # a failed evaluation without the metric: bin 0
    grid = islands.grid(0)
    assert grid.cell_of == {"seed": (0, 0), "a": (3, 1), "b": (3, 1), "c": (0, 0)}
    assert grid.elites == {(0, 0): "c", (3, 1): "a"} and grid.bins == 4


def test_a_metric_the_seed_does_not_return_stops_the_first_pick() -> None:
    settings = IslandSettings(islands=1, descriptors=parse_descriptors([{**RADIUS, "metric": "min_radiuz"}], "t/task.toml"))
    pool = Pool()
    pool.add(art("seed", 0.1, {"combined_score": 0.1, "min_radius": 0.01}, status="seed"))
    with pytest.raises(DescriptorError) as err:
        BoltzmannIslandSelector(settings).pick(pool, [], random.Random(0))
    assert "t/task.toml" in str(err.value) and "'min_radiuz'" in str(err.value) and "min_radius" in str(err.value)
    failed_seed = Pool()
    failed_seed.add(art("seed", 0.0, {}, status="seed"))  # no metrics to check yet: the run goes on
    assert BoltzmannIslandSelector(settings).pick(failed_seed, [], random.Random(0)).parent_id == "seed"


def test_the_strategy_gets_the_tasks_descriptors() -> None:
    declared = parse_descriptors([RADIUS])
    strategy = build("loongflow", "program", SearchParams(descriptors=declared))
    assert strategy.selector.settings.descriptors is declared
    assert build("loongflow", "program", SearchParams()).selector.settings.descriptors is None


# -- visit counts -------------------------------------------------------------------------------
def test_visit_weighting_divides_by_one_plus_visits() -> None:
    assert visit_weighted([0.5, 0.5], [0, 0]) == [0.5, 0.5]
    assert visit_weighted([0.5, 0.5], [3, 0]) == pytest.approx([0.2, 0.8])  # 0.125 : 0.5
    assert visit_weighted([0.25, 0.75], [1, 2]) == pytest.approx([0.125 / 0.375, 0.25 / 0.375])


def _two_cell_pool(settings: IslandSettings) -> Pool:
    pool = Pool()
    pool.add(art("seed", 0.5, {"min_radius": 0.01}, status="seed"))
    pool.add(art("far", 0.5, {"min_radius": 0.09}, island=0))
    return pool


def _far_share(settings: IslandSettings, visit_counts: bool) -> float:
    """Share of the first 5 picks going to the unvisited cell, over 60 fixed generator seeds, with
    the seed's cell already picked 9 times (equal scores: plain Boltzmann is 50/50)."""
    far = 0
    for seed in range(60):
        selector = BoltzmannIslandSelector(settings, explore_prob=0.0, visit_counts=visit_counts)
        selector.restore({"turn": 0, "visits": {"0:0,0": 9}})
        rng = random.Random(seed)
        far += sum(selector.pick(_two_cell_pool(settings), [], rng).parent_id == "far" for _ in range(5))
    return far / 300


def test_sampling_prefers_the_less_visited_cell() -> None:
    settings = IslandSettings(islands=1, migration_interval=100, descriptors=parse_descriptors([RADIUS]))
    weighted, plain = _far_share(settings, True), _far_share(settings, False)
    assert weighted > 0.7 and 0.4 < plain < 0.6, (weighted, plain)
    selector = BoltzmannIslandSelector(settings, explore_prob=0.0)
    selector.restore({"turn": 0, "visits": {"0:0,0": 9}})
    rng = random.Random(3)
    pool = _two_cell_pool(settings)
    for _ in range(200):
        selector.pick(pool, [], rng)
    visits = selector.state()["visits"]
    assert sum(visits.values()) == 209 and abs(visits["0:0,0"] - visits["0:3,0"]) <= 20  # the counts even out


def test_a_pick_records_the_cell_and_its_visits_before() -> None:
    settings = IslandSettings(islands=1, migration_interval=100, descriptors=parse_descriptors([RADIUS]))
    pool = _two_cell_pool(settings)
    selector = BoltzmannIslandSelector(settings, explore_prob=1.0)  # uniform over members
    rng = random.Random(1)
    seen: Counter = Counter()
    for _ in range(10):
        pick = selector.pick(pool, [], rng)
        cell = tuple(pick.tags["cell"])
        assert cell == {"seed": (0, 0), "far": (3, 0)}[pick.parent_id] and pick.tags["visits"] == seen[cell]
        seen[cell] += 1
    assert selector.state()["visits"] == {f"0:{x},{y}": n for (x, y), n in seen.items()}


def test_visit_counts_survive_a_state_save_and_restore() -> None:
    settings = IslandSettings(islands=2, migration_interval=100, descriptors=parse_descriptors([RADIUS]))
    pool = _two_cell_pool(settings)
    selector = BoltzmannIslandSelector(settings)
    for _ in range(7):
        selector.pick(pool, [], random.Random(11))
    stored = RunState.from_dict(RunState(strategy=part_states(stateful_parts((selector,)))).to_dict()).strategy
    assert sum(stored["loongflow.selector"]["visits"].values()) == 7
    resumed = BoltzmannIslandSelector(settings)
    restore_part_states(stateful_parts((resumed,)), stored)
    assert resumed.state() == selector.state()
    a, b = random.Random(5), random.Random(5)
    assert [selector.pick(pool, [], a).tags for _ in range(6)] == [resumed.pick(pool, [], b).tags for _ in range(6)]
