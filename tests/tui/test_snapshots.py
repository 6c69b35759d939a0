"""Snapshot tests on frozen data at 80x24 and 160x48 (plain `def`: snap_compare runs its own loop).

Update with `python -m pytest tests/tui --snapshot-update` after reviewing the HTML report.
"""

import pytest

from tests.tui.fakes import frozen_app


async def _settle(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_dashboard(snap_compare, size):
    assert snap_compare(frozen_app(), terminal_size=size, run_before=_settle)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_review_queue(snap_compare, size):
    async def go(pilot):
        await pilot.press("2")
        await _settle(pilot)

    assert snap_compare(frozen_app(), terminal_size=size, run_before=go)


def test_lineage_and_split_diff(snap_compare):
    async def go(pilot):
        await pilot.press("3")
        await _settle(pilot)
        await pilot.press("enter")  # the selection starts on the best
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()

    assert snap_compare(frozen_app(), terminal_size=(160, 48), run_before=go)


def test_too_small(snap_compare):
    assert snap_compare(frozen_app(), terminal_size=(50, 12), run_before=_settle)
