"""Snapshots of the review evidence, the lineage side panel and a folded code diff at 80x24
(plain `def`: snap_compare runs its own loop)."""

import pytest

from evotui.tui.screens import review
from evotui.tui.screens.lineage import DiffScreen
from tests.tui.fakes import lineage_settled
from tests.tui.fakes_evidence import EvidenceBackend, ProgramBackend, app_with
from tests.tui.test_diff_reading import NEW, OLD


async def _settle(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
def test_review_with_evidence(snap_compare, monkeypatch, size):
    async def go(pilot):
        await pilot.press("2")
        await _settle(pilot)

    now = 1_800_000_000.0  # ages count from a fixed clock
    monkeypatch.setattr(review, "clock", lambda: now)
    backend = EvidenceBackend()
    backend.clock = lambda: now
    assert snap_compare(app_with(backend), terminal_size=size, run_before=go)


@pytest.mark.parametrize("backend", [EvidenceBackend, ProgramBackend])
def test_lineage_panel(snap_compare, backend):
    async def go(pilot):
        await pilot.press("3")
        await lineage_settled(pilot)

    assert snap_compare(app_with(backend()), terminal_size=(80, 24), run_before=go)


def test_folded_code_diff(snap_compare):
    async def go(pilot):
        await _settle(pilot)
        pilot.app.push_screen(DiffScreen(OLD, NEW, "a000020 vs a000016"))
        await pilot.pause()
        await pilot.press("n", "n")
        await pilot.pause()

    assert snap_compare(app_with(EvidenceBackend()), terminal_size=(80, 24), run_before=go)
