"""The footer at 80 columns ends with the palette key, nothing after it (D12), and a read-only
components screen does not offer Restore or Edit (D12), while a controlling view does."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from evotui.tui.screens.lineage import DiffScreen
from tests.tui.fakes import CHILD, SEED, frozen_app
from tests.tui.fakes_components import ComponentsBackend
from tests.tui.test_components_screen import components_app, opened


def offered(app) -> list[str]:
    return [key.description for key in app.screen.query_one(Footer).query(FooterKey)]


async def test_the_palette_key_is_the_last_column_at_80():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(DiffScreen(SEED, CHILD, "t"))
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        assert footer.virtual_size.width > 80  # the keys overflow: some scroll beneath the palette key
        palette = footer.query_one("FooterKey.-command-palette", FooterKey)
        assert palette.region.right == 80 and footer.region.right == 80


async def test_read_only_components_offer_neither_restore_nor_edit():
    for can_control, shown in ((False, False), (True, True)):
        app = components_app(ComponentsBackend(can_control=can_control))
        async with app.run_test(size=(160, 48)) as pilot:
            await opened(pilot)
            await pilot.pause()
            keys = offered(app)
            assert ("Restore" in keys, "Edit" in keys) == (shown, shown), keys
