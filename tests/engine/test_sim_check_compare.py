"""The side-by-side table of `evotui sim-calibrate --check` (evotui/bench/sim_check.py): ratios to the
first mode, and agreement within 20% of the real ratio."""

from __future__ import annotations

import pytest

from engine.llm.sim import calibrate_fit as fitting
from evotui.bench import sim_check


def test_ratios_are_to_the_first_mode_and_agreement_is_within_twenty_percent():
    real = {"sync": [4.0, 2.0], "async": [4.0, 8.0], "chain": [3.0, 3.0]}  # medians 3, 6, 3
    sim = {"sync": [1.0], "async": [2.3], "chain": [1.25]}
    rows = {r["mode"]: r for r in sim_check.compare(["sync", "async", "chain"], real, sim)}
    assert rows["sync"]["real_ratio"] == rows["sync"]["sim_ratio"] == 1.0
    assert rows["async"]["real_ratio"] == pytest.approx(2.0) and rows["async"]["sim_ratio"] == pytest.approx(2.3)
    assert rows["async"]["off"] == pytest.approx(0.15) and rows["async"]["agrees"]
    assert rows["chain"]["off"] == pytest.approx(0.25) and not rows["chain"]["agrees"]
    text = sim_check.table(list(rows.values()), {"sync": 0, "async": 1, "chain": 2})
    assert "+25%!" in text and "+15% " in text


def test_the_profile_gets_the_fitted_lengths_and_keeps_its_measurements():
    fit = fitting.Fit(20.0, 30.0, 50.0, 4, 8192, True, {"default": {"median": 30.0, "sigma": 0.5, "max": 64}})
    text = fitting.profile_toml(fit, source="test", levels=[])
    fit.lengths = {"rollout": {"median": 26.5, "sigma": 0.7, "max": 64}}
    new = sim_check._with_lengths(text, fit)
    assert "[sim.lengths.rollout]" in new and "[sim.lengths.default]" not in new
    assert new.split("[sim.lengths.")[0] == text.split("[sim.lengths.")[0]
