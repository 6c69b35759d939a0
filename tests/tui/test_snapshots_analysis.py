"""Snapshots of the analysis screen (a hand-made lineage's figures, tests/tui/fakes_analysis.py)
at 80x24 and 160x48 (plain `def`: snap_compare runs its own loop)."""

import pytest

from tests.tui.fakes import themed_app
from tests.tui.fakes_analysis import AnalysisBackend, open_analysis


async def _open(pilot) -> None:
    await open_analysis(pilot)
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_analysis_screen(snap_compare, size):
    assert snap_compare(themed_app(AnalysisBackend()), terminal_size=size, run_before=_open)
