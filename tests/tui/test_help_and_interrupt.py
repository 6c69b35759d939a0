"""evotui's own F1 help and Ctrl+C (D14): the help names the screen's panels, every key active
there, how to steer and how to leave; Ctrl+C asks drain / stop / cancel and never stops unasked."""

from __future__ import annotations

from textual.widgets import Markdown

from evotui.tui.screens.help import HelpScreen, InterruptScreen
from tests.tui.fakes import FrozenBackend, frozen_app
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle


class RecordingBackend(FrozenBackend):
    """A run another process drives, with its control socket: commands are recorded."""

    can_control = True

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict]] = []

    async def control(self, cmd: str, **args):
        self.calls.append((cmd, args))


def help_text(app) -> str:
    return app.screen.query_one("#help-text", Markdown).source


async def test_f1_explains_the_screen_its_keys_steering_and_leaving():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = help_text(app)
        assert "## Dashboard" in text and "## Keys here" in text
        assert "## Steering the run" in text and "## Leaving" in text and "evotui attach" in text
        for what in ("Next dashboard panel (tab)", "Patch review queue", "evotui help"):
            assert what in text, what
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("3", "f1")
        assert isinstance(app.screen, HelpScreen) and "## Lineage" in help_text(app)


async def test_ctrl_c_asks_and_cancel_carries_on():
    backend = RecordingBackend()
    app = app_with(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, InterruptScreen)
        # A controlling view of a run another process drives: drain, stop, or leave it running.
        assert app.screen.offered() == ["drain", "stop", "leave"]
        await pilot.press("escape")
        assert not isinstance(app.screen, InterruptScreen) and app.is_running and backend.calls == []
        await pilot.press("ctrl+c", "d")
        await pilot.pause()
        assert backend.calls[-1][0] == "drain"
        await pilot.press("ctrl+c", "l")
        await pilot.pause()
    assert app.return_code in (0, None)


async def test_ctrl_c_in_a_read_only_view_offers_only_leaving():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+c")
        assert isinstance(app.screen, InterruptScreen) and app.screen.offered() == ["leave"]
        await pilot.press("d", "s")  # not offered: nothing happens
        assert isinstance(app.screen, InterruptScreen)
        await pilot.press("c")
        assert not isinstance(app.screen, InterruptScreen) and app.is_running
