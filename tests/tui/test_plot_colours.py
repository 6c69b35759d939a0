"""Plot lines are told apart by colour (D8): in every shipped theme the first five line colours
(the queue-depth plot draws one per stage: rollout, propose, evaluate, update, reflect) are far
apart, so propose and update no longer share a colour."""

from __future__ import annotations

import itertools
import math

import pytest

from evotui.tui.widgets.plots import HistoryPlot
from tests.tui.fakes import FrozenBackend, themed_app
from tests.tui.test_dashboard import settle

MIN_DISTANCE = 75
"""RGB distance below which two line colours read as one on a terminal."""


@pytest.mark.parametrize("theme", ["evotui-dark", "evotui-light", "evotui-256"])
async def test_depth_plot_stage_colours_are_distinct(theme: str):
    app = themed_app(FrozenBackend(), theme)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.theme == theme
        plot = app.screen.query_one("#plot-depth-overview", HistoryPlot)
        stages = list(app.backend.history.depth)
        assert len(stages) == 4
        colours = [plot._colour(i) for i in range(5)]
        for (i, a), (j, b) in itertools.combinations(enumerate(colours), 2):
            assert math.dist(a, b) >= MIN_DISTANCE, f"{theme}: lines {i} and {j} look alike: {a} {b}"
