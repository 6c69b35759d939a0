"""A new user finds every feature from F1 alone: on each screen the help lists every key active
there with what it does (a binding added later, the steering dialog's included), names the
screen's panels (the spend panel too) and says how to steer and how to leave."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Markdown

from pathlib import Path

from evotui.tui import app as app_module
from evotui.tui.app import EvoApp
from evotui.tui.keymap import APP_BINDINGS
from evotui.tui.screens.help import HelpScreen
from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle

SCREENS = {"1": "## Dashboard", "2": "## Review queue", "3": "## Lineage", "5": "## Analysis"}


def help_text(app) -> str:
    return app.screen.query_one("#help-text", Markdown).source


async def test_every_key_of_every_screen_is_in_its_help():
    app = app_with(FrozenBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        for key, heading in SCREENS.items():
            await pilot.press(key)
            await settle(pilot)
            under = app.screen
            active = [a.binding for a in under.active_bindings.values() if not a.binding.system and a.binding.description]
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            text = help_text(app)
            assert heading in text and "## Steering the run" in text and "## Leaving" in text
            for b in active:
                assert f"| `{app.get_key_display(b)}` | {b.tooltip or b.description}" in text, (key, b.action)
            await pilot.press("escape")
            await pilot.pause()
        await pilot.press("1")
        await pilot.press("f1")
        await pilot.pause()
        text = help_text(app)
        assert "**Budget & spend**" in text and "GPU slots" in text


class SteeringApp(EvoApp):
    """An app with a steering binding, as the steering screen adds one."""

    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))

    BINDINGS = APP_BINDINGS + [Binding("g", "toggle_help", "Steer", id="steer.open",
                                       tooltip="Steer the run: guidance, pin, ban, re-evaluate, branch")]


async def test_the_steering_dialog_is_described_from_its_binding():
    app = SteeringApp(FrozenBackend())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        text = help_text(app)
        assert "**g** opens the steering dialog (Steer the run: guidance, pin, ban, re-evaluate, branch)" in text
        assert "| `g` | Steer the run: guidance, pin, ban, re-evaluate, branch |" in text
    plain = app_with(FrozenBackend())
    async with plain.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert "The steering dialog (free-text guidance" in help_text(plain) and "not offered" in help_text(plain)
