"""Fitting a simulator profile to measurements (engine/llm/sim/calibrate_fit.py), on synthetic
measurements made by the serving model's own formula, so the fit must give its parameters back."""

from __future__ import annotations

import math
import tomllib

import pytest

from engine.config import RunConfig, SimConfig
from engine.llm.sim import calibrate_fit as fitting
from engine.llm.sim.calibrate_probe import Level, Sample


def _per_seq(s1: float, peak: float, b: int) -> float:
    return peak * s1 / (peak + s1 * (b - 1))


def _level(c: int, rate: float, tokens: int = 65, ttft: float = 0.05, n: int = 4) -> Level:
    latency = ttft + (tokens - 1) / rate
    return Level(c, wall_s=latency * n / c, samples=[Sample(c, 40, tokens, ttft, latency) for _ in range(n)])


@pytest.mark.parametrize("s1,peak", [(30.0, 45.0), (120.0, 3000.0), (80.0, 100.0)])
def test_decode_fit_recovers_single_sequence_and_peak(s1, peak):
    levels = [_level(c, _per_seq(s1, peak, c)) for c in (1, 2, 4, 8)]
    got_s1, got_peak = fitting.fit_decode(levels, slots=8)
    assert got_s1 == pytest.approx(s1, rel=1e-6)
    assert got_peak == pytest.approx(peak, rel=1e-6)


def test_levels_beyond_the_slots_are_left_out():
    s1, peak = 50.0, 120.0
    levels = [_level(c, _per_seq(s1, peak, c)) for c in (1, 2, 4)]
    levels.append(_level(8, 1.0))  # queueing behind 4 slots: would wreck the line if used
    assert fitting.fit_decode(levels, slots=4) == pytest.approx((s1, peak), rel=1e-6)


def test_no_slowdown_means_no_aggregate_limit():
    levels = [_level(c, 40.0) for c in (1, 2, 4)]
    s1, peak = fitting.fit_decode(levels, slots=4)
    assert s1 == pytest.approx(40.0)
    assert peak == pytest.approx(40.0 * fitting.NO_CONTENTION_FACTOR)


def test_decode_fit_needs_a_lone_sequence():
    with pytest.raises(fitting.FitError, match="concurrency 1"):
        fitting.fit_decode([_level(2, 30.0)], slots=4)


def test_prefill_is_the_slope_not_the_intercept():
    overhead, rate = 0.2, 150.0
    samples = [Sample(1, n, 1, overhead + n / rate, overhead + n / rate + 0.01) for n in (80, 800) for _ in range(3)]
    assert fitting.fit_prefill(samples) == pytest.approx(rate, rel=1e-9)
    flat = [Sample(1, n, 1, 0.1, 0.2) for n in (80, 800)]
    with pytest.raises(fitting.FitError, match="prompt caching"):
        fitting.fit_prefill(flat)


def test_shared_compute_threshold():
    assert fitting.shares_compute(30.0, 2.0)
    assert not fitting.shares_compute(30.0, 25.0)


def test_lengths_fit_is_robust_to_the_cap():
    # A lognormal with median 40 and sigma 0.5, its top third cut at 64 (max_tokens).
    qs = [(i + 0.5) / 300 for i in range(300)]
    xs = [min(64, round(40 * math.exp(0.5 * _probit(q)))) for q in qs]
    d = fitting.fit_lengths(xs, cap=64)
    assert d["median"] == pytest.approx(40, abs=1)
    assert d["sigma"] == pytest.approx(0.5, abs=0.05)
    assert d["max"] == 64
    by_stage = fitting.fit_stage_lengths({"rollout": xs, "propose": [60, 64, 64], "judge": [5]}, cap=64)
    assert set(by_stage) == {"rollout", "propose", "default"}  # judge: too few samples alone


def _probit(q: float) -> float:
    import statistics

    return statistics.NormalDist().inv_cdf(q)


def test_profile_file_loads_as_a_run_config_with_the_fitted_values(tmp_path):
    s1, peak = 30.0, 45.0
    levels = [_level(c, _per_seq(s1, peak, c)) for c in (1, 2, 4)]
    prefill = [Sample(1, n, 1, n / 150.0, n / 150.0) for n in (80, 800)]
    fit = fitting.fit(levels, prefill, slots=4, kv_cache_tokens=8192, prefill_shares_compute=True,
                      lengths={"rollout": {"median": 40.0, "sigma": 0.5, "max": 64}})
    path = tmp_path / "profile.toml"
    path.write_text(fitting.profile_toml(fit, source="a test", levels=levels))
    data = tomllib.loads(path.read_text())
    cfg = RunConfig.model_validate(data).sim
    assert isinstance(cfg, SimConfig)
    assert cfg.vllm_single_seq_tok_s == pytest.approx(s1, rel=1e-3)
    assert cfg.vllm_peak_tok_s == pytest.approx(peak, rel=1e-3)
    assert cfg.vllm_prefill_tok_s == pytest.approx(150.0, rel=1e-3)
    assert cfg.vllm_max_num_seqs == 4 and cfg.vllm_kv_cache_tokens == 8192
    assert cfg.vllm_prefill_shares_compute is True
    assert cfg.lengths["rollout"].median == 40.0 and cfg.lengths["rollout"].max == 64
    assert "concurrency" in path.read_text().splitlines()[2]  # the measurements, as a comment
