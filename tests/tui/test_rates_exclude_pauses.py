"""Rates leave out paused time and say so (D9): a minute's pause does not drag proposals per
minute down, and the Scores panel names the paused seconds it left out."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle


async def test_a_pause_does_not_lower_the_proposal_rate():
    backend = FrozenBackend()
    base = replace(backend.snap, simulated=False, proposals=30)
    app = app_with(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        def scores() -> str:
            return str(app.screen.query_one("#scores", Static).render())

        # (run seconds, state): 30 proposals in the first 60 s, paused from 70 s to 130 s.
        for elapsed, state in ((60.0, "running"), (70.0, "paused"), (130.0, "paused")):
            backend.snap = replace(base, elapsed_s=elapsed, state=state)
            await settle(pilot)
        assert "30.00 prop/min" not in scores()  # 70 s of running time while paused, held
        assert "25.71 prop/min" in scores() and "paused" not in scores().split("\n")[-1]
        backend.snap = replace(base, elapsed_s=131.0, state="running")
        await settle(pilot)
        # 131 s elapsed, 61 s of it paused (70 -> 131): 30 proposals in 70 running seconds.
        assert app.sampler.frame.paused_s == 61.0
        assert "25.71 prop/min" in scores(), scores()
        assert "rates leave out 61 s paused" in scores()
