"""D1: resizes while the event loop is busy (an engine sharing the loop, simulated by a hog that
holds it in 30 ms slices) lay the screen out for the new size every time: the status line on
the first row, the footer on the last, every overview panel where the compositor says it is and
none overlapping, the event log following. 20 of 20 resizes, checked through what the
compositor maps at each cell (what the terminal shows), not the widgets' own idea of it."""

from __future__ import annotations

import asyncio
import time

from textual.widgets import Footer

from evotui.tui.widgets.panels import StatusBar
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import LinesBackend, settle

SIZES = [(80, 24), (160, 48), (100, 30), (120, 36), (90, 26)] * 4
"""20 resizes, narrow and wide, short and tall, each different from the one before."""


async def hog(stop: asyncio.Event) -> None:
    """Hold the loop in 30 ms slices, as a busy engine does between its awaits."""
    while not stop.is_set():
        end = time.perf_counter() + 0.03
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)


def owner(app, widget_type, x: int, y: int) -> bool:
    """Whether the widget shown at (x, y) is a `widget_type` or inside one."""
    widget, _ = app.screen.get_widget_at(x, y)
    return any(isinstance(w, widget_type) for w in (widget, *widget.ancestors))


async def test_twenty_resizes_under_load_render_correctly():
    backend = LinesBackend()
    app = app_with(backend)
    stop = asyncio.Event()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        backend.queue = [f"line {i}" for i in range(80)]
        await settle(pilot)
        load = asyncio.create_task(hog(stop))
        good = 0
        try:
            for n, (w, h) in enumerate(SIZES):
                await pilot.resize_terminal(w, h)
                backend.queue = [f"during resize {n}"]  # new log lines land while the loop is busy
                for _ in range(3):
                    await settle(pilot)
                screen = app.screen
                assert app.size == (w, h)
                assert owner(app, StatusBar, 0, 0) and owner(app, StatusBar, w - 1, 0), f"{w}x{h}: status line"
                assert owner(app, Footer, 0, h - 1) and owner(app, Footer, w - 1, h - 1), f"{w}x{h}: footer"
                panels = [screen.queues, screen.scores] + [p for p in screen.panels[:3] if p.display and w >= 120]
                regions = []
                for panel in panels:
                    r = panel.region
                    assert r.width > 0 and r.height > 0 and r.right <= w and r.bottom < h - 1, f"{w}x{h}: {panel.id} {r}"
                    cx, cy = r.x + r.width // 2, r.y + r.height // 2
                    assert app.screen.get_widget_at(cx, cy)[0] is panel, f"{w}x{h}: {panel.id} covered"
                    regions.append(r)
                assert not any(a.overlaps(b) for i, a in enumerate(regions) for b in regions[i + 1:]), f"{w}x{h}: overlap"
                log = screen.log_view
                assert log.region.bottom <= h - 1 and log.scroll_y == log.max_scroll_y, f"{w}x{h}: log left its end"
                assert log.lines[-1] == f"during resize {n}"
                good += 1
        finally:
            stop.set()
            await load
    assert good == 20


async def test_the_status_line_takes_its_form_for_the_new_width_before_the_next_frame():
    """The header's long form (150 columns and up) cut at 80 read "RUNNINGSIMULATED x400r2026..."
    until the sampler's next frame, seconds away on a busy loop; it now follows its own resize."""
    app = app_with(LinesBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        status = app.screen.status_bar
        assert "SIMULATED x400" in str(status.render())
        app.sampler.pause()  # no frame arrives after the resize
        for size, form, other in [((80, 24), "SIM x400", "SIMULATED"), ((160, 48), "SIMULATED x400", " RO ")]:
            await pilot.resize_terminal(*size)
            await pilot.pause()
            text = str(status.render())
            assert form in text and other not in text, (size, text)
