"""Budgets with reservations: admission, charging, release, wall time, resume counters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.costs.budget import KEYS, Budget, Reservation
from engine.config import BudgetConfig


def test_unlimited_budget_admits_anything() -> None:
    b = Budget(BudgetConfig())
    r = b.try_reserve({"tokens": 1e12, "llm_calls": 1e6}, wall_s=1e9)
    assert r is not None and b.exhausted is None
    assert b.limits_dict() == {k: None for k in (*KEYS, "wall_s")}
    assert b.remaining("tokens") is None


def test_try_reserve_refuses_beyond_limit_and_names_the_key() -> None:
    b = Budget(BudgetConfig(max_proposals=2))
    assert b.try_reserve({"proposals": 1}, 0) is not None
    assert b.try_reserve({"proposals": 1}, 0) is not None
    assert b.reserved["proposals"] == 2
    assert b.try_reserve({"proposals": 1}, 0) is None
    assert b.exhausted == "proposals"
    assert b.reserved["proposals"] == 2


def test_reservation_exactly_at_limit_is_admitted() -> None:
    b = Budget(BudgetConfig(max_tokens=100))
    assert b.try_reserve({"tokens": 100}, 0) is not None
    assert b.try_reserve({"tokens": 0.5}, 0) is None
    assert b.exhausted == "tokens"


def test_refusal_reserves_nothing_even_when_only_a_later_key_fails() -> None:
    b = Budget(BudgetConfig(max_tokens=1000, max_llm_calls=3))
    r = b.try_reserve({"tokens": 100, "llm_calls": 4}, 0)
    assert r is None
    assert b.exhausted == "llm_calls"
    assert b.reserved == {k: 0.0 for k in KEYS}


def test_charge_consumes_the_reservation_and_release_returns_the_rest() -> None:
    b = Budget(BudgetConfig(max_tokens=1000, max_llm_calls=10))
    r = b.try_reserve({"tokens": 600, "llm_calls": 4}, 0)
    assert isinstance(r, Reservation)
    b.charge("tokens", 250, r)
    b.charge("llm_calls", 1, r)
    assert b.spent["tokens"] == 250 and b.reserved["tokens"] == 350
    assert r.amounts == {"tokens": 350, "llm_calls": 3}
    # room is spent + reserved: 250 + 350 = 600, so 400 more fits and 401 does not
    assert b.try_reserve({"tokens": 401}, 0) is None
    b.release(r)
    assert r.released
    assert b.reserved["tokens"] == 0 and b.reserved["llm_calls"] == 0
    assert b.spent["tokens"] == 250 and b.spent["llm_calls"] == 1
    assert b.remaining("tokens") == 750
    # releasing twice does not hand the room back twice
    b.release(r)
    assert b.reserved["tokens"] == 0
    b.release(None)


def test_overcharge_never_drives_reserved_negative() -> None:
    b = Budget(BudgetConfig(max_tokens=1000))
    r = b.try_reserve({"tokens": 100}, 0)
    b.charge("tokens", 180, r)
    assert b.spent["tokens"] == 180
    assert b.reserved["tokens"] == 0
    assert r.amounts["tokens"] == 0
    b.release(r)
    assert b.reserved["tokens"] == 0


def test_charge_without_or_after_reservation_only_spends() -> None:
    b = Budget(BudgetConfig(max_tokens=1000))
    other = b.try_reserve({"tokens": 300}, 0)
    b.charge("tokens", 50)
    assert b.spent["tokens"] == 50 and b.reserved["tokens"] == 300
    mine = b.try_reserve({"tokens": 100}, 0)
    b.release(mine)
    b.charge("tokens", 40, mine)  # a late charge on a released reservation
    assert b.spent["tokens"] == 90
    assert b.reserved["tokens"] == 300
    b.charge("tokens", 10, Reservation({"llm_calls": 5}))  # key not in the reservation
    assert b.reserved["tokens"] == 300 and b.spent["tokens"] == 100
    assert other is not None


def test_release_makes_room_for_new_admissions() -> None:
    b = Budget(BudgetConfig(max_metric_calls=10))
    r = b.try_reserve({"metric_calls": 8}, 0)
    assert b.try_reserve({"metric_calls": 5}, 0) is None
    b.charge("metric_calls", 3, r)
    b.release(r)
    assert b.try_reserve({"metric_calls": 5}, 0) is not None
    assert b.try_reserve({"metric_calls": 3}, 0) is None  # 3 spent + 5 reserved + 3 > 10


def test_wall_time_limit() -> None:
    b = Budget(BudgetConfig(max_wall_s=10))
    assert b.try_reserve({}, 9.99) is not None
    assert b.exhausted is None
    assert b.try_reserve({"tokens": 1}, 10.0) is None
    assert b.exhausted == "wall_s"
    assert b.reserved["tokens"] == 0


def test_wall_time_counts_earlier_sessions() -> None:
    b = Budget(BudgetConfig(max_wall_s=10), spent={"wall_s": 7.5, "tokens": 40, "proposals": 2})
    assert b.wall_spent_before == 7.5
    assert b.spent["tokens"] == 40 and b.spent["proposals"] == 2 and b.spent["llm_calls"] == 0
    assert "wall_s" not in b.spent
    assert b.try_reserve({}, 2.0) is not None
    assert b.try_reserve({}, 2.5) is None
    assert b.exhausted == "wall_s"
    counters = b.counters(1.25)
    assert counters == {"proposals": 2, "llm_calls": 0, "tokens": 40, "metric_calls": 0, "usd": 0, "gpu_s": 0, "wall_s": 8.75}


def test_restored_spent_counts_against_limits() -> None:
    b = Budget(BudgetConfig(max_tokens=100), spent={"tokens": 60})
    assert b.try_reserve({"tokens": 41}, 0) is None
    assert b.try_reserve({"tokens": 40}, 0) is not None
    assert b.remaining("tokens") == 40


def test_counters_of_a_fresh_budget() -> None:
    b = Budget(BudgetConfig())
    assert b.counters(3.0) == {**{k: 0.0 for k in KEYS}, "wall_s": 3.0}


def test_reserve_unchecked_skips_admission_but_counts() -> None:
    b = Budget(BudgetConfig(max_proposals=1))
    r1 = b.reserve_unchecked({"proposals": 1})
    r2 = b.reserve_unchecked({"proposals": 1})
    assert b.reserved["proposals"] == 2
    assert b.exhausted is None
    assert b.try_reserve({"proposals": 1}, 0) is None
    b.charge("proposals", 1, r1)
    b.release(r1)
    b.release(r2)
    assert b.reserved["proposals"] == 0 and b.spent["proposals"] == 1


def test_remaining_never_negative() -> None:
    b = Budget(BudgetConfig(max_llm_calls=2), spent={"llm_calls": 5})
    assert b.remaining("llm_calls") == 0.0
    assert b.limit("llm_calls") == 2.0


# -- property: reservations keep the run inside every limit --------------------------------------------

LIMIT = st.one_of(st.none(), st.integers(min_value=1, max_value=20))
AMOUNT = st.one_of(st.integers(0, 8), st.floats(0, 8, allow_nan=False, allow_infinity=False))


@settings(max_examples=150, deadline=None, database=None)
@given(
    limits=st.fixed_dictionaries({k: LIMIT for k in KEYS}),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["admit", "admit", "charge", "charge", "release"]),
            st.dictionaries(st.sampled_from(KEYS), AMOUNT, max_size=4),
            st.integers(0, 1000),
            st.floats(0, 1, allow_nan=False),
        ),
        max_size=40,
    ),
)
def test_spent_plus_reserved_never_exceeds_a_limit(limits: dict, ops: list) -> None:
    # GPU-seconds are configured in hours (max_gpu_hours).
    budget = Budget(BudgetConfig(**{("max_gpu_hours" if k == "gpu_s" else f"max_{k}"):
                                    (v / 3600 if k == "gpu_s" and v is not None else v) for k, v in limits.items()}))
    live: list[Reservation] = []
    eps = 1e-9
    for kind, estimate, pick, fraction in ops:
        if kind == "admit":
            r = budget.try_reserve(estimate, 0.0)
            if r is not None:
                live.append(r)
            else:
                assert budget.exhausted in KEYS
        elif kind == "charge" and live:
            r = live[pick % len(live)]
            keys = sorted(r.amounts)
            if keys:
                key = keys[pick % len(keys)]
                budget.charge(key, r.amounts[key] * fraction, r)
        elif kind == "release" and live:
            budget.release(live.pop(pick % len(live)))
        for key in KEYS:
            cap = limits[key]
            assert budget.reserved[key] >= -eps
            if cap is not None:
                assert budget.spent[key] + budget.reserved[key] <= cap + eps
            # bookkeeping: reserved is what the live reservations still hold
            assert budget.reserved[key] == pytest.approx(sum(r.amounts.get(key, 0.0) for r in live), abs=1e-6)
    for r in live:
        budget.release(r)
    for key in KEYS:
        assert abs(budget.reserved[key]) <= 1e-6
