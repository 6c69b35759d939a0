"""Staleness policies: full lets everything pass, guarded discards beyond max_gap."""

from __future__ import annotations

import pytest

from engine.staleness import Decision, FullPolicy, GuardedPolicy, make_policy


@pytest.mark.parametrize("gap", [0, 1, 5, 10_000])
def test_full_always_passes(gap: int) -> None:
    decision = FullPolicy().decide(gap)
    assert decision.action == "pass"


def test_full_reason_tells_fresh_from_unchecked() -> None:
    assert FullPolicy().decide(0).reason == "fresh"
    assert "never checked" in FullPolicy().decide(3).reason


@pytest.mark.parametrize(
    "max_gap, gap, action",
    [(2, 0, "pass"), (2, 1, "pass"), (2, 2, "pass"), (2, 3, "discard"), (0, 0, "pass"), (0, 1, "discard"), (5, 50, "discard")],
)
def test_guarded_threshold_is_inclusive(max_gap: int, gap: int, action: str) -> None:
    decision = GuardedPolicy(max_gap).decide(gap)
    assert decision.action == action
    assert str(gap) in decision.reason and str(max_gap) in decision.reason


def test_guarded_discard_reason() -> None:
    assert GuardedPolicy(2).decide(3) == Decision("discard", "gap 3 > max_gap 2")
    assert GuardedPolicy(2).decide(2) == Decision("pass", "gap 2 <= max_gap 2")


def test_make_policy_builds_the_named_policy() -> None:
    full = make_policy("full", 7)
    assert isinstance(full, FullPolicy) and full.name == "full"
    guarded = make_policy("guarded", 4)
    assert isinstance(guarded, GuardedPolicy) and guarded.name == "guarded"
    assert guarded.max_gap == 4
    assert guarded.decide(5).action == "discard"


@pytest.mark.parametrize("name", ["reflect", "Full", "", "guarded "])
def test_make_policy_rejects_unknown_names(name: str) -> None:
    with pytest.raises(ValueError) as info:
        make_policy(name, 2)
    message = str(info.value)
    assert repr(name) in message
    assert "full" in message and "guarded" in message


def test_decision_is_immutable() -> None:
    d = Decision("pass", "fresh")
    with pytest.raises(AttributeError):
        d.action = "discard"  # type: ignore[misc]
