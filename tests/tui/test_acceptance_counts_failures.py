"""The Scores panel's acceptance counts failed proposals (D7): a program run where every
candidate that evaluates joins the population must not read `accept 100%` beside `16 fail`."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle


async def test_failures_lower_the_acceptance_rate():
    backend = FrozenBackend()
    backend.snap = replace(backend.snap, accepted=4, rejected=0, failed=16, discarded_stale=0)
    app = app_with(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = str(app.screen.query_one("#scores", Static).render())
        assert "accept 20%" in text and "16 fail" in text, text


async def test_no_verdict_yet_reads_as_a_dash():
    backend = FrozenBackend()
    backend.snap = replace(backend.snap, accepted=0, rejected=0, failed=0)
    app = app_with(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "accept -%" in str(app.screen.query_one("#scores", Static).render())
