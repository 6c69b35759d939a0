"""The islands view: the engine's read-only islands query and the TUI screen over it (frozen data)."""

from __future__ import annotations

from dataclasses import replace

from engine.strategy.islands_view import build_islands_view, island_options
from engine.pool import Artifact
from evotui.tui.screens.islands import IslandsScreen
from tests.tui.fakes import FrozenBackend, themed_app
from tests.tui.fakes_islands import STRATEGY, IslandsBackend, frozen_artifacts


def test_island_options_only_for_island_strategies():
    assert island_options({"name": "loongflow"}) == {}
    # A stored table without migration_trigger ran before it existed: with the interval migration.
    assert island_options({"name": "contextevolve", "contextevolve": {"selection": "islands"},
                           "loongflow": {"islands": 4}}) == {"islands": 4, "migration_trigger": "interval"}
    assert island_options({"name": "contextevolve", "contextevolve": {"selection": "tournament"}}) is None
    assert island_options({"name": "gepa"}) is None
    assert build_islands_view({"name": None}, frozen_artifacts()) is None


def test_view_folds_like_the_archive():
    view = build_islands_view(STRATEGY, frozen_artifacts())
    assert view is not None
    assert [i.index for i in view.islands] == [0, 1, 2]
    assert view.folded == 15 and view.next_migration_in == 5 and view.feature == "novelty"
    # The best (a000014, 0.74) migrated from its home island 2 into both ring neighbours.
    assert {(m.from_island, m.to_island) for m in view.migrations if m.artifact_id == "a000014"} == {(2, 0), (2, 1)}
    for island in view.islands:
        assert island.best_id == "a000014" and island.best_score == 0.74
        assert all(0 <= c.x < island.bins and 0 <= c.y < island.bins for c in island.cells)
        assert island.temperature > 0
    contextevolve = {"name": "contextevolve", "contextevolve": {"selection": "islands"},
                     "loongflow": STRATEGY["loongflow"]}
    assert build_islands_view(contextevolve, frozen_artifacts()) == view


async def _tick(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


async def test_key_opens_islands_and_brackets_select_an_island():
    app = themed_app(IslandsBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await _tick(pilot)
        await pilot.press("4")
        await _tick(pilot)
        screen = app.screen
        assert isinstance(screen, IslandsScreen)
        assert screen.query_one("#islands-table").row_count == 3
        grid = str(screen.query_one("#island-grid").render())
        assert "island 0" in grid and "0.740" in grid and "length →" in grid
        assert "a000014 island 2 → 0, 1" in str(screen.query_one("#migrations").render())
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert screen.selected_island == 1 and "island 1" in str(screen.query_one("#island-grid").render())
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        assert screen.selected_island == 2
        assert screen.query_one("#islands-table").cursor_row == 2


async def test_new_migrations_are_marked_as_they_happen():
    backend = IslandsBackend()
    app = themed_app(backend)
    async with app.run_test(size=(100, 30)) as pilot:
        await _tick(pilot)
        await pilot.press("4")
        await _tick(pilot)
        screen = app.screen
        assert "new v" not in str(screen.query_one("#migrations").render())
        # Five more commits reach the next migration.
        last = backend.arts[-1]
        for k in range(15, 20):
            score = 0.8 + k / 100
            backend.arts.append(Artifact(f"a{k:06d}", last.text + f"# variant {k}\n" * (k % 4 + 1),
                                         (last.artifact_id,), k + 1, {"score": score},
                                         meta={"selection": {"island": k % 3}}))
        backend.snap = replace(backend.snap, pool_version=len(backend.arts))
        await _tick(pilot)
        text = str(screen.query_one("#migrations").render())
        assert f"new v{len(backend.arts)}" in text
        assert screen.view is not None and screen.view.folded == 20 and screen.view.next_migration_in == 5


async def test_islands_not_offered_without_islands():
    app = themed_app(FrozenBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await _tick(pilot)
        assert app.check_action("show_islands", ()) is False
        commands = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(t.startswith("Islands") for t in commands)
        offered = [key for key, active in app.screen.active_bindings.items() if active.enabled]
        assert "4" not in offered and "3" in offered  # the footer shows enabled bindings only
        await pilot.press("4")
        await _tick(pilot)
        assert app.current_mode == "dashboard"
    app = themed_app(IslandsBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        await _tick(pilot)
        assert app.check_action("show_islands", ()) is True
        assert any(c.title.startswith("Islands") for c in app.get_system_commands(app.screen))


async def test_live_and_attached_runs_show_the_same_islands(tmp_path):
    from engine.run.runner import EngineRun
    from evotui.tui.attach import AttachBackend
    from evotui.tui.backend import LiveBackend

    db = tmp_path / "run.db"
    layer = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 8}, "strategy": {"name": "loongflow"}}
    run = await EngineRun.create("rules", [("test", layer)], db)
    live = LiveBackend(run)
    assert live.has_islands
    await run.run()
    view = live.islands()
    assert view is not None and view is live.islands()  # rebuilt only when the pool changes
    assert len(view.islands) == 3 and view.folded == len([a for a in run.ctx.pool.artifacts() if a.status != "removed"])
    attached = AttachBackend(db, run.ctx.run_id)
    await attached.start()
    try:
        assert attached.has_islands and attached.islands() == view
    finally:
        await attached.close()


def test_per_example_scores_put_coverage_on_the_grid():
    arts = [Artifact("p0", "seed prompt", (), 1, {"e1": 1.0, "e2": 0.0}, status="seed")]
    arts += [Artifact(f"p{i}", "seed prompt" + " rule" * i, ("p0",), i + 1, {"e1": 1.0, "e2": float(i % 2)},
                      meta={"selection": {"island": i % 3}}) for i in range(1, 7)]
    view = build_islands_view(STRATEGY, arts)
    assert view is not None and view.feature == "coverage"
    assert build_islands_view(STRATEGY, frozen_artifacts()).feature == "novelty"
