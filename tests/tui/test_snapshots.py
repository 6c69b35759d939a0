"""Snapshot tests on frozen data: every screen at 80x24, 120x36 and 160x48, in the dark and the
light theme, for a prompt task and a program task; the dashboard's tabs at each size; the split
diff and the too-small notice. Plain `def`: snap_compare runs its own loop.

Update with `python -m pytest tests/tui/test_snapshots.py --snapshot-update` after reviewing the
HTML report.
"""

import pytest

from evotui.tui.launch import prepare
from evotui.tui.screens import review
from tests.tui.fakes import FrozenBackend, frozen_app, lineage_settled
from tests.tui.fakes_evidence import ProgramBackend, app_with

SIZES = [(80, 24), (120, 36), (160, 48)]
NOW = 1_800_000_000.0
"""The wall clock of every snapshot (pending items' ages count from it)."""
TASKS = {"prompt": FrozenBackend, "program": ProgramBackend}
SCREENS = {"dashboard": (), "review": ("2",), "lineage": ("3",), "diff": ("3", "enter")}
"""Key presses that open each screen (the diff: the lineage's selection, the best, full screen)."""


def size_id(size) -> str:
    return f"{size[0]}x{size[1]}"


async def _settle(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


def frozen(task: str, theme: str, monkeypatch):
    monkeypatch.setattr(review, "clock", lambda: NOW)
    backend = TASKS[task]()
    backend.clock = lambda: NOW
    app = app_with(backend)
    app._theme_name = prepare(app, theme, [])
    return app


def keys(*pressed: str):
    async def go(pilot):
        await _settle(pilot)
        for key in pressed:
            await pilot.press(key)
            await (lineage_settled(pilot) if key == "3" else _settle(pilot))

    return go


@pytest.mark.parametrize("size", SIZES, ids=size_id)
@pytest.mark.parametrize("theme", ["evotui-dark", "evotui-light"])
@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("screen", SCREENS)
def test_screen(snap_compare, monkeypatch, screen, task, theme, size):
    app = frozen(task, theme, monkeypatch)
    assert snap_compare(app, terminal_size=size, run_before=keys(*SCREENS[screen]))


@pytest.mark.parametrize("size", SIZES, ids=size_id)
@pytest.mark.parametrize("tab", [1, 2, 3, 4], ids=["scores", "queues-gaps", "llm", "budget"])
def test_dashboard_tab(snap_compare, monkeypatch, tab, size):
    app = frozen("prompt", "evotui-dark", monkeypatch)
    assert snap_compare(app, terminal_size=size, run_before=keys(*["right_square_bracket"] * tab))


def test_lineage_and_split_diff(snap_compare):
    async def go(pilot):
        await pilot.press("3")
        await lineage_settled(pilot)
        await pilot.press("enter")  # the selection starts on the best
        await pilot.pause()
        await pilot.press("m")
        await pilot.pause()

    assert snap_compare(frozen_app(), terminal_size=(160, 48), run_before=go)


def test_too_small(snap_compare):
    assert snap_compare(frozen_app(), terminal_size=(50, 12), run_before=_settle)
