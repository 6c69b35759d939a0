"""BudgetConfig.metric_calls_rule: "reserve" never spends past max_metric_calls; "gepa" admits
while what is made and reserved is under it (gepa.optimize's rule), so it ends above the budget
by at most one item."""

from __future__ import annotations

from engine.costs.budget import Budget
from engine.config import BudgetConfig

STEP = {"metric_calls": 39.0, "proposals": 1.0}


def _admitted(rule: str, cap: int) -> tuple[int, float]:
    """Items admitted one after another, each spending its whole worst case: (items, calls)."""
    budget = Budget(BudgetConfig(max_metric_calls=cap, metric_calls_rule=rule))
    n = 0
    while (r := budget.try_reserve(dict(STEP), 0.0)) is not None:
        budget.charge("metric_calls", STEP["metric_calls"], r)
        budget.release(r)
        n += 1
    return n, budget.spent["metric_calls"]


def test_reserve_never_passes_the_budget_and_gepa_passes_it_by_at_most_one_item():
    for cap in (1, 38, 39, 40, 120, 150, 155):
        n_res, spent_res = _admitted("reserve", cap)
        n_gepa, spent_gepa = _admitted("gepa", cap)
        assert spent_res <= cap < spent_res + STEP["metric_calls"]
        assert spent_gepa >= cap and spent_gepa - STEP["metric_calls"] < cap
        assert n_gepa in (n_res, n_res + 1)


def test_gepa_rule_counts_reservations_of_work_in_flight():
    budget = Budget(BudgetConfig(max_metric_calls=100, metric_calls_rule="gepa"))
    held = [budget.try_reserve(dict(STEP), 0.0) for _ in range(3)]
    assert all(held[:3]) and budget.reserved["metric_calls"] == 117
    assert budget.try_reserve(dict(STEP), 0.0) is None and budget.exhausted == "metric_calls"
