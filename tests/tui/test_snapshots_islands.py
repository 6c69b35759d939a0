"""Snapshots of the islands screen (a loongflow run's frozen artifacts, folded by the engine's
island archive) and of the lineage's notes panel (loongflow plan/summary, contextevolve
summary/guidance/exemplars) at 80x24 and 160x48 (plain `def`: snap_compare runs its own loop)."""

import pytest

from evotui.tui.app import EvoApp
from tests.tui.fakes import lineage_settled, themed_app
from tests.tui.fakes_islands import ContextEvolveBackend, IslandsBackend

SIZES = [(80, 24), (160, 48)]


def islands_app() -> EvoApp:
    return themed_app(IslandsBackend())


def opened(*pressed: str):
    async def go(pilot):
        await pilot.pause()
        pilot.app.sampler.tick()
        for key in ("4", *pressed):
            await pilot.press(key)
            await pilot.pause()
            pilot.app.sampler.tick()
            await pilot.pause()

    return go


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_islands_screen(snap_compare, size):
    assert snap_compare(islands_app(), terminal_size=size, run_before=opened())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_islands_second_island(snap_compare, size):
    assert snap_compare(islands_app(), terminal_size=size, run_before=opened("right_square_bracket"))


async def _open_lineage(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.press("3")
    await lineage_settled(pilot)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("backend", [IslandsBackend, ContextEvolveBackend], ids=["loongflow", "contextevolve"])
def test_lineage_notes_panel(snap_compare, backend, size):
    assert snap_compare(themed_app(backend()), terminal_size=size, run_before=_open_lineage)
