"""A quiet TUI: nothing is repainted when the data did not change, nothing is written while paused.

Repaints are measured by counting render() calls on every widget of the screen (Textual calls
it whenever a widget's region must be drawn again); terminal bytes by running the real TUI in a
pseudo-terminal (evotui.bench.ui) and counting what it writes.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from engine.run.runner import EngineRun
from evotui.bench import ui as bench_ui
from evotui.tui.app import EvoApp
from evotui.tui.backend import LiveBackend
from evotui.tui.screens.dashboard import DashboardScreen
from evotui.tui.settings import UISettings
from evotui.tui.widgets.plots import HistoryPlot
from tests.tui.fakes import frozen_app

LAYER = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 400}}


def count_renders(screen) -> Counter:
    """Wrap render() of every widget on `screen`; the Counter fills in as widgets repaint."""
    counts: Counter = Counter()
    for widget in screen.walk_children(with_self=True):
        original = widget.render

        def counted(original=original, name=widget.id or type(widget).__name__):
            counts[name] += 1
            return original()

        widget.render = counted
    return counts


async def settle(pilot, seconds: float) -> None:
    await pilot.pause(seconds)
    await pilot.wait_for_scheduled_animations()


async def test_an_unchanged_frame_repaints_nothing():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, 0.3)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        assert app.sampler.applied == 1
        renders_before = {p.id: p.renders for p in (screen.queues, *screen.panels, screen.status_bar)}
        counts = count_renders(screen)
        for _ in range(10):
            app.sampler.tick()
            await pilot.pause()
        await settle(pilot, 0.3)
        assert app.sampler.ticks >= 11
        assert app.sampler.applied == 1, "a frame equal to the last one must not reach the screen"
        assert {p.id: p.renders for p in (screen.queues, *screen.panels, screen.status_bar)} == renders_before
        assert sum(counts.values()) == 0, f"repainted without a change: {dict(counts)}"


async def test_a_panel_skips_an_update_with_the_same_markup():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, 0.3)
        screen = app.screen
        frame = app.sampler.frame
        counts = count_renders(screen)
        # Applying the same frame directly (bypassing the sampler's check) changes no markup.
        with app.batch_update():
            screen.apply(frame, app)
        await settle(pilot, 0.2)
        assert sum(counts.values()) == 0, dict(counts)
        # A stage selection changes only the queue panel and the status line.
        app.selected_stage = "propose"
        app.sampler.tick()
        await settle(pilot, 0.2)
        assert set(counts) <= {"queues", "status"}, dict(counts)
        assert counts["queues"] >= 1 and counts["status"] >= 1


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])  # at 160x48 the overview shows plots
async def test_a_paused_live_run_repaints_nothing(tmp_path, size):
    run = await EngineRun.create("rules", [("test", LAYER)], tmp_path / "runs.db")
    app = EvoApp(LiveBackend(run), engine=run.run, settings=UISettings(refresh_hz=10))
    async with app.run_test(size=size) as pilot:
        loop = asyncio.get_running_loop()
        end = loop.time() + 90  # a deadline for a hung run, not a speed check
        while run.snapshot().proposals < 3:
            assert loop.time() < end, "the run made no progress"
            await pilot.pause(0.05)
        await pilot.press("space")
        assert run.snapshot().state == "paused"
        # Running requests finish after a pause; wait until the frames stop changing.
        end = loop.time() + 90
        applied = -1
        while applied != app.sampler.applied:
            assert loop.time() < end, "the paused run kept changing"
            applied = app.sampler.applied
            await settle(pilot, 1.0)
        applied, ticks = app.sampler.applied, app.sampler.ticks
        plots = list(app.screen.query(HistoryPlot))
        drawn = [p.redraws for p in plots]
        if size[0] >= 120:
            assert sum(drawn) >= 3, "the overview's plots never drew"
        counts = count_renders(app.screen)
        # Five sampler ticks while paused, however long a loaded machine takes to give them.
        end = loop.time() + 60
        while app.sampler.ticks < ticks + 5:
            assert loop.time() < end, "the sampler stopped ticking"
            await settle(pilot, 0.2)
        assert app.sampler.applied == applied, "a paused run produced new frames"
        assert sum(counts.values()) == 0, f"repainted while paused: {dict(counts)}"
        assert [p.redraws for p in plots] == drawn, "a plot redrew while paused"
        run.stop("test over")
        await app.engine_worker.wait()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_the_real_tui_writes_nothing_while_paused(tmp_path, size):
    """The LinuxDriver in a pty, bytes counted on the master side (what SSH would carry)."""
    rates = bench_ui.bytes_once("rules", 400, size, window=3.0, tmp=str(tmp_path))
    assert rates["running_Bps"] > 0, rates
    assert rates["paused_Bps"] < 20, rates
