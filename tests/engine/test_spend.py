"""Prices, the spend meter and the dollar/GPU budgets' reservations."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.costs.budget import Budget
from engine.config import BudgetConfig, RunConfig
from engine.llm.records import CallRecord
from engine.pricing import Price, PriceError, PriceTable
from engine.costs.spend import SpendMeter


def _rec(prompt: int, completion: int, *, stage: str = "propose", endpoint: str = "task", model: str = "gpt-4o",
         url: str = "https://api.example/v1", latency: float = 2.0) -> CallRecord:
    return CallRecord(endpoint=endpoint, url=url, model=model, stage=stage, status="ok", finish_reason="stop",
                      prompt_tokens=prompt, completion_tokens=completion, latency_s=latency, ttft_s=None,
                      retries=0, error=None, started_at=0.0)


def _config(**task_llm) -> RunConfig:
    return RunConfig.model_validate({"task_llm": {"url": "https://api.example/v1", "model": "gpt-4o",
                                                  "max_tokens": 1000, **task_llm}})


def test_lookup_by_name_prefix_and_date():
    table = PriceTable.load()
    gpt4o = table.lookup("gpt-4o")
    assert gpt4o == Price(2.5, 10.0, 1.25)
    assert table.lookup("openai/GPT-4o") == gpt4o
    assert table.lookup("gpt-4o-2024-08-06") == gpt4o
    assert table.lookup("no-such-model") is None
    assert gpt4o.usd(1_000_000, 0) == pytest.approx(2.5)
    assert gpt4o.usd(1_000_000, 1_000_000, cached_tokens=400_000) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 10.0)


def test_override_file_wins_and_bad_files_say_why(tmp_path: Path):
    f = tmp_path / "p.toml"
    f.write_text('[models."gpt-4o"]\ninput = 1\noutput = 1\n[models."mine"]\ninput = 0.5\noutput = 0.5\n')
    table = PriceTable.load(f)
    assert table.lookup("gpt-4o") == Price(1.0, 1.0) and table.lookup("mine") == Price(0.5, 0.5)
    f.write_text('[models."x"]\ninput = 1\n')
    with pytest.raises(PriceError, match="needs input and output"):
        PriceTable.load(f)
    f.write_text("[prices]\n")
    with pytest.raises(PriceError, match="only"):
        PriceTable.load(f)
    with pytest.raises(PriceError, match="cannot read"):
        PriceTable.load(tmp_path / "absent.toml")


def test_meter_tallies_and_warns_once_for_unknown_models():
    meter = SpendMeter.for_config(_config())
    usd, gpu_s = meter.record("task", "https://api.example/v1", "gpt-4o", "propose", 1000, 500, 2.0)
    assert usd == pytest.approx((1000 * 2.5 + 500 * 10.0) / 1e6) and gpu_s == 0.0
    meter.record("task", "https://api.example/v1", "mystery", "rollout", 1000, 500, 2.0)
    meter.record("task", "https://api.example/v1", "mystery", "rollout", 1000, 500, 2.0)
    assert meter.unpriced == ["mystery"] and len(meter.warnings) == 1
    fig = meter.figures()
    assert fig["by_stage"]["rollout"] == {"calls": 2, "usd": 0.0, "gpu_s": 0.0}
    assert fig["by_model"]["gpt-4o"]["usd"] == pytest.approx(usd, abs=1e-6)


def test_gpu_endpoint_costs_gpu_seconds_not_dollars():
    cfg = RunConfig.model_validate({"task_llm": {"url": "http://127.0.0.1:8000/v1", "model": "gpt-4o", "gpus": 2,
                                                 "endpoints": [{"url": "http://10.0.0.2:8000/v1", "gpus": 4},
                                                               {"url": "http://10.0.0.3:8000/v1"}]}})
    meter = SpendMeter.for_config(cfg)
    assert meter.record("task", "http://10.0.0.2:8000/v1", "gpt-4o", "propose", 10, 10, 3.0) == (0.0, 12.0)
    assert meter.record("task", "http://10.0.0.3:8000/v1", "gpt-4o", "propose", 10, 10, 3.0) == (0.0, 6.0)
    assert meter.figures()["gpu_hours"] == pytest.approx(18.0 / 3600)


def test_restore_from_groups_equals_the_calls():
    calls = [("task", "https://api.example/v1", "gpt-4o", "propose", p, c, 1.5) for p, c in
             [(1200, 300), (900, 800), (4000, 10)]]
    live = SpendMeter.for_config(_config())
    for endpoint, url, model, stage, p, c, lat in calls:
        live.record(endpoint, url, model, stage, p, c, lat)
    stored = SpendMeter.for_config(_config())
    stored.restore([["task", "https://api.example/v1", "gpt-4o", "propose", 3, 6100, 1110, 4.5]])
    assert stored.usd == pytest.approx(live.usd, rel=1e-12)


def test_usd_reservation_is_the_worst_case_and_holds_the_cap():
    meter = SpendMeter.for_config(_config())
    worst, _ = meter.worst_call()
    # Before any call: a 4096-token prompt prior and max_tokens (1000) of output.
    assert worst == pytest.approx((4096 * 2.5 + 1000 * 10.0) / 1e6)
    budget = Budget(BudgetConfig(max_usd=3.5 * worst), meter=meter)
    first = budget.try_reserve({"llm_calls": 2}, 0.0)
    assert first is not None and budget.reserved["usd"] == pytest.approx(2 * worst)
    assert budget.try_reserve({"llm_calls": 2}, 0.0) is None and budget.exhausted == "usd"
    usd, _ = budget.charge_call(_rec(1000, 200), first)
    assert budget.spent["usd"] == pytest.approx(usd)
    budget.release(first)
    assert budget.reserved["usd"] == pytest.approx(0.0)
    # The prompt seen grows the bound: 1.5x the largest prompt once it passes the prior.
    budget.charge_call(_rec(8000, 10))
    assert meter.worst_call()[0] == pytest.approx((12000 * 2.5 + 1000 * 10.0) / 1e6)


def test_gpu_hours_limit():
    cfg = _config(gpus=1, url="http://127.0.0.1:8000/v1")
    meter = SpendMeter.for_config(cfg)
    budget = Budget(BudgetConfig(max_gpu_hours=0.1), meter=meter)  # 360 GPU-seconds
    assert budget.limit("gpu_s") == pytest.approx(360.0)
    r = budget.try_reserve({"llm_calls": 2}, 0.0)  # 2 x 120 s prior
    assert r is not None and budget.try_reserve({"llm_calls": 2}, 0.0) is None
    budget.charge_call(_rec(10, 10, url="http://127.0.0.1:8000/v1", latency=30.0), r)
    assert budget.spent["gpu_s"] == pytest.approx(30.0) and budget.spent["usd"] == 0.0
