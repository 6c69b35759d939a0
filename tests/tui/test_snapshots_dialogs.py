"""Snapshots of the dialogs and screens the other snapshot files take at one size or none, at
80x24 and 160x48: the F1 help, the Ctrl+C question (a run this TUI drives) and the dashboard
with an attached view's READ-ONLY header."""

from __future__ import annotations

import pytest

from tests.tui.test_help_and_interrupt import RecordingBackend
from tests.tui.test_snapshots import _settle, frozen, size_id

SIZES = [(80, 24), (160, 48)]


def press(*keys: str):
    async def go(pilot):
        await _settle(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause()

    return go


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_help(snap_compare, monkeypatch, size):
    assert snap_compare(frozen("prompt", "evotui-dark", monkeypatch), terminal_size=size, run_before=press("f1"))


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_interrupt_question(snap_compare, monkeypatch, size):
    app = frozen("prompt", "evotui-dark", monkeypatch)
    app.backend = RecordingBackend()  # a run that takes control: drain and stop are offered
    app.sampler.backend = app.backend
    assert snap_compare(app, terminal_size=size, run_before=press("ctrl+c"))


@pytest.mark.parametrize("size", SIZES, ids=size_id)
def test_steering_dialog(snap_compare, monkeypatch, size):
    app = frozen("prompt", "evotui-dark", monkeypatch)
    app.backend = RecordingBackend()  # a run this TUI drives: the dialog is offered
    app.sampler.backend = app.backend
    assert snap_compare(app, terminal_size=size, run_before=press("g"))
