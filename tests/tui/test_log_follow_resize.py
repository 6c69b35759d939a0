"""The event log keeps following across resizes (D3): a log made shorter keeps its offset above
the new end, and it must still show the newest line, before and after the next write."""

from __future__ import annotations

from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import LinesBackend, settle


async def _sixty_lines(pilot, app, backend):
    """The dashboard's event log after 60 lines arrived (more than any of these sizes shows)."""
    await settle(pilot)
    backend.queue = [f"line {i}" for i in range(60)]
    await settle(pilot)
    return app.screen.log_view


async def test_a_following_log_stays_at_its_end_through_every_resize():
    backend = LinesBackend()
    app = app_with(backend)
    async with app.run_test(size=(80, 40)) as pilot:
        log = await _sixty_lines(pilot, app, backend)
        assert log.scroll_y == log.max_scroll_y > 0
        for size in [(80, 24), (120, 30), (160, 48), (100, 20), (80, 24)]:
            await pilot.resize_terminal(*size)
            await settle(pilot)
            assert log.following and log.scroll_y == log.max_scroll_y, f"resize to {size} left the end"
            backend.queue = [f"after {size}"]
            await settle(pilot)
            assert log.scroll_y == log.max_scroll_y and log.lines[-1] == f"after {size}"
            assert not log.border_subtitle


async def test_a_scrolled_up_log_stays_put_through_a_resize():
    backend = LinesBackend()
    app = app_with(backend)
    async with app.run_test(size=(80, 40)) as pilot:
        log = await _sixty_lines(pilot, app, backend)
        log.scroll_home(animate=False)
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        backend.queue = ["new"]
        await settle(pilot)
        assert not log.following and log.scroll_y == 0
        assert log.border_subtitle == "scrolled up · 1 new below · End follows"
