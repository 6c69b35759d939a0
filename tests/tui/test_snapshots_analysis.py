"""Snapshots of the analysis screen (a hand-made lineage's figures, tests/tui/fakes_analysis.py)
at 80x24 and 160x48 (plain `def`: snap_compare runs its own loop)."""

import pytest

from evotui.tui.app import EvoApp
from evotui.tui.launch import prepare
from tests.tui.fakes_analysis import AnalysisBackend


async def _open(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.press("5")
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_analysis_screen(snap_compare, size):
    app = EvoApp(AnalysisBackend())
    app._theme_name = prepare(app, "evotui-dark", [])
    assert snap_compare(app, terminal_size=size, run_before=_open)
