"""Modals dim the screen beneath instead of blanking it (D15); the help screen (D14) in a
snapshot at 80x24."""

from __future__ import annotations

from evotui.tui.screens.base import ConfirmScreen
from tests.tui.fakes import frozen_app
from tests.tui.test_snapshots import _settle, frozen


async def test_a_modal_is_translucent_over_the_dashboard():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        app.push_screen(ConfirmScreen("Drain the run?"))
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert 0 < app.screen.styles.background.a < 1


def test_confirm_over_dashboard_snapshot(snap_compare, monkeypatch):
    async def confirm(pilot):
        await _settle(pilot)
        pilot.app.push_screen(ConfirmScreen("Drain the run? Nothing new is admitted; in-flight work finishes."))
        await pilot.pause()

    assert snap_compare(frozen("prompt", "evotui-dark", monkeypatch), terminal_size=(80, 24), run_before=confirm)


def test_help_snapshot(snap_compare, monkeypatch):
    async def help_open(pilot):
        await _settle(pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(frozen("prompt", "evotui-dark", monkeypatch), terminal_size=(80, 24), run_before=help_open)
