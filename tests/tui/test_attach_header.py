"""An attached read-only view's status line says READ-ONLY once (D15), not "read-only READ-ONLY"."""

from __future__ import annotations

from engine.run.runner import EngineRun
from evotui.tui.app import EvoApp
from evotui.tui.attach import AttachBackend
from evotui.tui.settings import UISettings


async def test_read_only_is_said_once(tmp_path):
    db = tmp_path / "r.db"
    run = await EngineRun.create("rules", [("t", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 2}})], db)
    await run.run()
    attach = AttachBackend(db, run.ctx.run_id)
    await attach.start()
    try:
        assert not attach.can_control
        app = EvoApp(attach, settings=UISettings())
        async with app.run_test(size=(200, 30)) as pilot:
            await pilot.pause()
            app.sampler.tick()
            await pilot.pause()
            status = str(app.screen.status_bar.render())
            assert "attached" in status and status.lower().count("read-only") == 1, status
    finally:
        await attach.close()
