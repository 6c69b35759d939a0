"""The LLM table's latencies are in the plot's unit (D10): simulated seconds in a simulated run
(wall seconds x the time scale), plain seconds otherwise, and the heading names the unit."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle


async def table(backend) -> str:
    app = app_with(backend)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        return str(app.screen.query_one("#llm", Static).render())


async def test_simulated_latencies_are_simulated_seconds():
    text = await table(FrozenBackend())  # x400; task p50/p95 0.84/2.91 wall seconds
    assert "p50/p95 sim s" in text and "336/1164" in text, text


async def test_real_latencies_are_seconds():
    backend = FrozenBackend()
    backend.snap = replace(backend.snap, simulated=False)
    text = await table(backend)
    assert "p50/p95 s" in text and "sim s" not in text and "0.84/2.91" in text, text
