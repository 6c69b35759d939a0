"""MAP-Elites descriptors on prompt tasks (engine/selection/islands.py): artifacts scored per
instance are placed by length and coverage (the share of instances at full marks), programs
(one score) still by length and novelty."""

from __future__ import annotations

from engine.pool import Artifact, Pool
from engine.selection.islands import IslandArchive, IslandSettings


def _prompt(n: int, text: str, scores: list[float], parent: int | None = None, status: str = "confirmed") -> Artifact:
    return Artifact(f"a{n:06d}", text, (f"a{parent:06d}",) if parent is not None else (), n,
                    {f"v{i}": s for i, s in enumerate(scores)}, status="seed" if parent is None else status,
                    meta={"selection": {"island": 0}} if parent is not None else {})


def test_prompt_artifacts_are_placed_by_length_and_coverage() -> None:
    arts = [_prompt(0, "Sort the items.", [0.0, 0.5, 0.5, 0.0]),
            _prompt(1, "Sort the items. Keep case.", [1.0, 1.0, 0.5, 0.0], 0),  # covers half
            _prompt(2, "Sort the items. Keep case!", [1.0, 1.0, 1.0, 1.0], 0),  # same length, covers all
            _prompt(3, "Sort the items. Keep case? ", [0.5, 0.5, 0.5, 0.5], 0)]
    archive = IslandArchive(IslandSettings(islands=1, bins=3), arts)
    assert [archive.traits(a.artifact_id).coverage for a in arts] == [0.0, 0.5, 1.0, 0.0]
    grid = archive.grid(0)
    # a000001 and a000002 differ only in coverage: different cells, both elites of their cell.
    assert grid.cell_of["a000001"][0] == grid.cell_of["a000002"][0]
    assert grid.cell_of["a000001"][1] != grid.cell_of["a000002"][1]
    assert {"a000001", "a000002"} <= set(grid.elites.values())


def test_programs_keep_length_and_novelty() -> None:
    arts = [Artifact("a000000", "x = 1\n", (), 0, {"combined_score": 0.5}, status="seed"),
            Artifact("a000001", "y = 22222\n", ("a000000",), 1, {"combined_score": 0.6},
                     meta={"selection": {"island": 0}})]
    archive = IslandArchive(IslandSettings(islands=1, bins=2), arts)
    traits = archive.traits("a000001")
    assert traits.coverage is None and traits.behaviour == traits.novelty > 0


def test_a_speculative_prompt_rescored_on_its_full_set_gets_its_coverage_anew() -> None:
    pool = Pool()
    pool.add(_prompt(0, "Sort.", [0.0, 0.0, 0.0, 0.0]))
    archive = pool.index(("islands", 1), lambda arts: IslandArchive(IslandSettings(islands=1), arts))
    pool.add(_prompt(1, "Sort. Keep case.", [1.0, 1.0], 0, status="speculative"))
    assert archive.traits("a000001").coverage == 1.0
    pool.set_status("a000001", "confirmed", {"v0": 1.0, "v1": 1.0, "v2": 0.0, "v3": 0.0})
    assert archive.traits("a000001").coverage == 0.5
