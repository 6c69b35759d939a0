"""engine/steering/state.py and acts.py: the replay of acts, the counts, the checks (pure)."""

from __future__ import annotations

import pytest

from engine.pool import Artifact, Pool
from engine.steering import Act, SteerError, SteeringState
from engine.steering.live import append_section


def _pool(*ids_status: tuple[str, str]) -> Pool:
    pool = Pool()
    for n, (aid, status) in enumerate(ids_status):
        pool.add(Artifact(artifact_id=aid, text=f"t{n}", parent_ids=(), created_version=n, val_scores={"x": n / 10},
                          status=status, created_at=0.0, meta={}))
    return pool


def _act(state: SteeringState, act: str, **kw) -> Act:
    a = Act(act_id=state.next_id, act=act, by="test", created_at=1.0, **kw)
    state.apply(a)
    return a


def test_guidance_for_n_proposals_runs_out_and_a_resumed_proposal_counts_once() -> None:
    s = SteeringState()
    g = _act(s, "guide", text="shorter rules", count=2)
    assert s.new_for("i1") == [g.act_id]
    _act(s, "use", target=str(g.act_id), item_id="i1")
    assert s.new_for("i1") == [] and s.guidance[g.act_id].left == 1
    _act(s, "use", target=str(g.act_id), item_id="i2")
    assert s.guidance == {} and s.new_for("i3") == []
    assert s.used == {"i1": [g.act_id], "i2": [g.act_id]}
    # The same acts replayed (a resume) give the same state.
    again = SteeringState(s.acts)
    assert again.view() == s.view() and again.used == s.used and again.next_id == s.next_id == 4


def test_unguide_one_or_all_and_until_withdrawn() -> None:
    s = SteeringState()
    a, b = _act(s, "guide", text="a"), _act(s, "guide", text="b")
    for item in ("i1", "i2", "i3"):
        _act(s, "use", target=str(a.act_id), item_id=item)
    assert s.guidance[a.act_id].left is None  # until withdrawn
    _act(s, "unguide", target=str(a.act_id))
    assert list(s.guidance) == [b.act_id]
    _act(s, "unguide", target=None)
    assert s.guidance == {}


def test_pin_counts_down_and_a_ban_of_the_pinned_candidate_ends_the_pin() -> None:
    s = SteeringState()
    p = _act(s, "pin", target="a1", count=2)
    _act(s, "use", target=str(p.act_id))
    assert s.pin is not None and s.pin.left == 1
    _act(s, "use", target=str(p.act_id))
    assert s.pin is None
    _act(s, "pin", target="a1")
    _act(s, "ban", target="a1")
    assert s.pin is None and s.bans == {"a1": 5}
    _act(s, "unban", target="a1")
    assert s.bans == {}


def test_checks_name_the_problem() -> None:
    pool = _pool(("a0", "seed"), ("a1", "confirmed"), ("a2", "speculative"))
    s = SteeringState()
    with pytest.raises(SteerError, match="no candidate 'zz' in this run"):
        s.check({"act": "pin", "target": "zz"}, pool)
    with pytest.raises(SteerError, match="a2 is speculative: only a fully validated"):
        s.check({"act": "pin", "target": "a2"}, pool)
    with pytest.raises(SteerError, match="--for must be a whole number from 1"):
        s.check({"act": "guide", "text": "x", "count": 0}, pool)
    with pytest.raises(SteerError, match="guidance must be non-empty text"):
        s.check({"act": "guide", "text": "   "}, pool)
    with pytest.raises(SteerError, match="no guidance is active"):
        s.check({"act": "unguide"}, pool)
    with pytest.raises(SteerError, match="no candidate is pinned"):
        s.check({"act": "unpin"}, pool)
    with pytest.raises(SteerError, match="either the held-out set"):
        s.check({"act": "reeval", "target": "a1"}, pool)
    with pytest.raises(SteerError, match="unknown steering act"):
        s.check({"act": "bless", "target": "a1"}, pool)
    assert s.check({"act": "guide", "text": " keep it short \n", "count": 3}, pool) == {"text": "keep it short",
                                                                                        "count": 3}
    _act(s, "ban", target="a0")
    with pytest.raises(SteerError, match="would leave no validated candidate"):
        s.check({"act": "ban", "target": "a1"}, pool)
    with pytest.raises(SteerError, match="a0 is banned; unban it first"):
        s.check({"act": "pin", "target": "a0"}, pool)
    with pytest.raises(SteerError, match="a1 is not banned"):
        s.check({"act": "unban", "target": "a1"}, pool)


def test_the_section_quotes_every_line_under_its_own_heading() -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U\n```\ncurrent\n```"}]
    out = append_section(messages, {3: "use ```code``` sparingly\nsecond line"})
    assert messages[1]["content"] == "U\n```\ncurrent\n```"  # not changed in place
    tail = out[1]["content"].split("## Guidance from the operator", 1)[1]
    assert "### #3\n> use ```code``` sparingly\n> second line" in tail
    assert out[0] == messages[0]
