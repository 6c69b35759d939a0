"""Issue 37 in the TUI: spend per stage and model against the money caps, and GPU slot
occupancy, on the Budget & spend tab; busy slots on the overview's Queues panel; a live run's
figures are its spend meter's."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from textual.widgets import Static

from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle


def plain(app, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def _budget_tab(pilot) -> None:
    await settle(pilot)
    for _ in range(4):
        await pilot.press("right_square_bracket")
    await settle(pilot)


async def test_the_budget_tab_shows_spend_by_stage_and_model_and_each_gpu() -> None:
    app = app_with(FrozenBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "gpu slots 3/4 busy (0:2 1:1)" in plain(app, "#queues")
        await _budget_tab(pilot)
        text = plain(app, "#spend")
        assert "dollars" in text and "$0.3102 (no cap)" in text and "0.0125 (no cap)" in text
        lines = text.splitlines()
        reflect = next(line for line in lines if line.startswith("reflect"))
        assert reflect.split() == ["reflect", "23", "$0.3102", "0.0000"]
        assert next(line for line in lines if line.startswith("rollout")).split() == ["rollout", "610", "$0.0000", "0.0125"]
        assert any(line.startswith("gpt-4.1-mini") for line in lines) and any("Qwen/Qwen3-8B" in line for line in lines)
        assert "GPU slots 3/4 busy · 2 per GPU · 57 evaluations leased one" in text
        assert any(line.startswith("GPU 0") and line.endswith("2/2") for line in lines)
        assert any(line.startswith("GPU 1") and line.endswith("1/2") for line in lines)


async def test_caps_show_what_is_left_and_an_unpriced_model_is_named() -> None:
    backend = FrozenBackend()
    limits = dict(backend.snap.budget_limits, usd=1.0, gpu_s=3600.0)
    backend.snap = replace(backend.snap, budget_limits=MappingProxyType(limits))
    frame = backend.frame

    def with_unpriced():
        f = frame()
        return replace(f, spend={**f.spend, "unpriced_models": ["my-model"]}, gpu=None)

    backend.frame = with_unpriced
    app = app_with(backend)
    async with app.run_test(size=(160, 48)) as pilot:
        await _budget_tab(pilot)
        text = plain(app, "#spend")
        assert "$0.3102/$1.0000 · left $0.6898" in text and "0.0125/1.0000 · left 0.9875" in text
        assert "no price for my-model" in text and "GPU slots: none" in text
        assert "gpu slots" not in plain(app, "#queues")


async def test_a_live_runs_frame_carries_its_spend_meter(tmp_path) -> None:
    from engine.run.runner import EngineRun
    from evotui.headless import drive
    from evotui.tui.backend import LiveBackend

    run = await EngineRun.create("rules", [("t", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 4}})],
                                 tmp_path / "r.db")
    backend = LiveBackend(run)
    await drive(run, events_path=None, progress_every=60.0, quiet=True)
    frame = backend.frame()
    assert frame.spend == run.ctx.budget.meter.figures()
    assert sum(v["calls"] for v in frame.spend["by_stage"].values()) == frame.snap.llm_calls > 0
    assert frame.gpu is None  # a prompt task leases no GPU slots
