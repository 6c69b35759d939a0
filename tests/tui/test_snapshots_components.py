"""Snapshots of the components screen on frozen data (an agent of four named components, one
frozen, with sepl audit rows) at 80x24 and 160x48: as opened (the active version of the first
component), an older version with the attempts from it that did not commit, and the hot-swap
editor (plain `def`: snap_compare runs its own loop)."""

import pytest
from textual.widgets import Input, TextArea

from tests.tui.fakes_components import ComponentsBackend, components_app

SIZES = [(80, 24), (160, 48)]


async def settled(pilot) -> None:
    """Open the screen and wait until its list, the selection and the audit rows are in (a worker
    reads them), counting frames, not time."""
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.press("6")
    screen = pilot.app.screen
    for _ in range(50):
        pilot.app.sampler.tick()
        await pilot.pause()
        if screen.view is not None and screen.loaded and screen.selected() is not None:
            break
    await pilot.pause()


def opened(option_id: str | None = None, *keys: str):
    async def go(pilot) -> None:
        await settled(pilot)
        if option_id is not None:
            pilot.app.screen._highlight(option_id)
            await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
        for widget in pilot.app.screen.query("TextArea, Input"):
            if isinstance(widget, (TextArea, Input)):
                widget.cursor_blink = False  # a blinking cursor is a different frame each time
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    return go


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_components_screen(snap_compare, size):
    assert snap_compare(components_app(), terminal_size=size, run_before=opened())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_components_older_version_with_rejected_attempts(snap_compare, size):
    assert snap_compare(components_app(), terminal_size=size, run_before=opened("v:system@1.1.0"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_components_hot_swap_editor(snap_compare, size):
    app = components_app(ComponentsBackend(can_control=True))
    assert snap_compare(app, terminal_size=size, run_before=opened("c:round_total", "e"))
