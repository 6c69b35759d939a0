"""The islands screen of a run whose task declares [[descriptor]] axes: the grid is drawn on them
(their names, ranges and bins, a non-square grid) and the cells sit where the declared metric
bins them; the migrations panel lists the recorded migrations with their trigger figures. Frozen
artifacts (tests/tui/fakes_islands.py), folded by the engine with the declared axes."""

from __future__ import annotations

from engine.strategy.descriptors import parse_descriptors
from engine.strategy.islands_view import IslandsView, build_islands_view
from evotui.tui.screens.islands import IslandsScreen
from tests.tui.fakes import themed_app
from tests.tui.fakes_islands import STRATEGY, IslandsBackend, frozen_artifacts

# The frozen artifacts' score is their only metric: 4 bins over [0, 1] across, length 2 bins up.
DECLARED = parse_descriptors([{"name": "quality", "metric": "score", "range": [0.0, 1.0], "bins": 4},
                              {"name": "size", "metric": "length", "range": [0, 120], "bins": 2}])
DIVERSITY = {"name": "loongflow", "loongflow": {**STRATEGY["loongflow"], "migration_trigger": "diversity",
                                                "migration_threshold": 0.05}}


class DeclaredAxesBackend(IslandsBackend):
    def __init__(self) -> None:
        super().__init__()
        self.strategy = DIVERSITY

    def islands(self) -> IslandsView | None:
        return self._cache.get(len(self.arts), self.strategy, lambda: list(self.arts), DECLARED)


def test_the_view_bins_cells_on_the_declared_axes() -> None:
    view = build_islands_view(DIVERSITY, frozen_artifacts(), DECLARED)
    default = build_islands_view(DIVERSITY, frozen_artifacts())
    assert view is not None and default is not None
    assert [(a.name, a.bins) for a in view.axes] == [("quality", 4), ("size", 2)]
    texts = {a.artifact_id: a for a in frozen_artifacts()}
    for island in view.islands:
        for c in island.cells:
            art = texts[c.artifact_id]
            assert (c.x, c.y) == (min(3, int(art.val_mean * 4)), min(1, int(len(art.text) / 120 * 2)))
    # The default grid is another one: min-max length and novelty over each island.
    assert [i.cells for i in view.islands] != [i.cells for i in default.islands]


async def test_the_screen_draws_the_declared_axes_and_the_recorded_migrations() -> None:
    app = themed_app(DeclaredAxesBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.sampler.tick()
        await pilot.press("4")
        await pilot.pause()
        app.sampler.tick()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, IslandsScreen)
        view = screen.view
        assert view is not None and view.events
        grid = str(screen.query_one("#island-grid").render())
        assert "size ↑  (length 0..120)" in grid and "quality →  (score 0..1)" in grid
        assert "of 8 cells" in grid and "elites (cell quality,size)" in grid
        rows = [ln for ln in grid.splitlines() if "│" in ln and "└" not in ln]
        assert len(rows) == 2  # two bins up
        table = screen.query_one("#islands-table")
        assert all(str(table.get_row_at(n)[-1]).endswith("/8") for n in range(table.row_count))
        migrations = str(screen.query_one("#migrations").render())
        assert "where diversity differs > 0.05" in migrations
        assert f"recorded · {len(view.events)} in all" in migrations
        m = view.events[-1]
        assert f"v{m.version} {m.source} → {m.target} D {m.source_diversity:.2f} vs {m.target_diversity:.2f}" in migrations
