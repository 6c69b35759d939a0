"""Chains for program tasks (engine/capabilities/program_chain.py): every step starts from the
shared head, an edit made while another chain moved the head is merged onto it before its
evaluation (or, when it cannot join, evaluated as a branch or turned away unevaluated), and a
committed program above the head becomes it."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from engine.capabilities.program_chain import ProgramChain
from engine.items import Proposal, WorkItem
from engine.pool import Artifact, Pool
from engine.run.state import ChainState
from engine.steering.state import SteeringState

BASE = "def f():\n    a = 1\n    b = 2\n    c = 3\n    return a + b + c\n"


def _ctx(chains: int = 4, chains_min: int | None = None) -> SimpleNamespace:
    pool = Pool()
    pool.add(Artifact("a000000", BASE, (), 0, {"combined_score": 0.5}, status="seed"))
    pipeline = SimpleNamespace(chains=chains, chain_floor=chains_min or chains, chain_grow_after=3)
    return SimpleNamespace(pool=pool, chain=ChainState(), staleness_counts=Counter(),
                           config=SimpleNamespace(pipeline=pipeline), steering=SteeringState())


def _item(n: int) -> WorkItem:
    return WorkItem(item_id=f"i{n:06d}", created_version=0, parent_id="", minibatch=[], stage="propose",
                    created_at=0.0)


def _commit(ctx, aid: str, text: str, score: float) -> None:
    ctx.pool.add(Artifact(aid, text, (ctx.chain.head_base,), 0, {"combined_score": score}))


def _two_steps_then_a_new_head(evaluate_unjoinable: bool = True, **kw):
    """Two steps started from the seed; the first commits `a = 5` above it and becomes the head."""
    ctx = _ctx(**kw)
    chain = ProgramChain(ctx, evaluate_unjoinable)
    one, two = _item(1), _item(2)
    chain.start(one)
    chain.start(two)
    _commit(ctx, "a000001", BASE.replace("a = 1", "a = 5"), 0.7)
    chain.committed(one, "a000001", 0.7)
    return ctx, chain, two


def test_steps_start_from_the_head_and_a_better_commit_moves_it():
    ctx = _ctx()
    chain = ProgramChain(ctx)
    one, two = _item(1), _item(2)
    chain.start(one)
    chain.start(two)
    assert one.parent_id == two.parent_id == "a000000" and one.chain.head_seq == 0
    _commit(ctx, "a000001", BASE.replace("a = 1", "a = 5"), 0.7)
    chain.committed(one, "a000001", 0.7)
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000001", 1)
    _commit(ctx, "a000009", BASE.replace("a = 1", "a = 0"), 0.6)  # below the head: stays in the pool only
    chain.committed(_item(9), "a000009", 0.6)
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000001", 1)
    three = _item(3)
    chain.start(three)
    assert three.parent_id == "a000001" and "a = 5" in three.chain.head_text


def test_an_edit_made_on_an_older_head_is_merged_onto_the_newer_one_before_its_evaluation():
    ctx, chain, two = _two_steps_then_a_new_head()
    two.proposal = Proposal(child=BASE.replace("c = 3", "c = 9"))
    assert chain.rebase(two) == ""
    assert two.proposal.child.strip() == BASE.replace("a = 1", "a = 5").replace("c = 3", "c = 9").strip()
    assert two.parent_id == "a000001" and two.proposal.rebased["from_seq"] == 0
    assert ctx.staleness_counts["chain_rebase"] == 1
    # Evaluated on the merged program, committed above the head: both edits are in the new head.
    _commit(ctx, "a000002", two.proposal.child, 0.8)
    chain.committed(two, "a000002", 0.8)
    assert "a = 5" in ctx.chain.head_text and "c = 9" in ctx.chain.head_text


def test_with_reject_an_edit_the_newer_head_already_holds_is_turned_away_unevaluated():
    ctx, chain, two = _two_steps_then_a_new_head(False, chains=4, chains_min=2)
    ctx.chain.count = 3
    two.proposal = Proposal(child=BASE.replace("a = 1", "a = 5"))  # the same edit, made by the other chain
    reason = chain.rebase(two)
    assert reason.startswith("does not apply to the newer head")
    assert ctx.staleness_counts["chain_unjoinable"] == 1 and ctx.chain.count == 2  # a collision takes a chain away


def test_by_default_a_conflicting_edit_is_evaluated_as_a_branch_of_its_own_head():
    ctx, chain, two = _two_steps_then_a_new_head(chains=4, chains_min=2)
    ctx.chain.count = 3
    conflicting = BASE.replace("a = 1", "a = 7")  # the line the new head changed, changed otherwise
    two.proposal = Proposal(child=conflicting)
    assert chain.rebase(two) == ""
    # Unmerged, on the seed it was made from, and no longer a chain step.
    assert two.proposal.child == conflicting and two.parent_id == "a000000" and two.chain is None
    assert ctx.staleness_counts["chain_unjoinable"] == ctx.staleness_counts["chain_branched"] == 1
    assert ctx.chain.count == 2  # the collision still takes a chain away
    # Scored above the head, the branch becomes the head; its end is not counted as a clean step too.
    _commit(ctx, "a000002", conflicting, 0.9)
    chain.committed(two, "a000002", 0.9)
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000002", 2)
    assert ctx.chain.clean_steps == 0 and ctx.chain.count == 2


def test_a_fresh_step_needs_no_rebase():
    ctx = _ctx()
    chain = ProgramChain(ctx)
    one = _item(1)
    chain.start(one)
    one.proposal = Proposal(child=BASE.replace("b = 2", "b = 4"))
    assert chain.rebase(one) == "" and one.proposal.rebased is None


def _speculative_head():
    """A step whose early cascade stage scored 0.7 (above the seed's 0.5): its program is the head."""
    ctx = _ctx()
    chain = ProgramChain(ctx)
    one = _item(1)
    chain.start(one)
    ctx.pool.add(Artifact("a000001", BASE.replace("a = 1", "a = 5"), ("a000000",), 0, {"combined_score": 0.7},
                          status="speculative"))
    chain.speculative_head(one, "a000001")
    return ctx, chain, one


def test_a_speculative_program_above_the_head_becomes_it_and_hands_its_chain_on():
    ctx, chain, one = _speculative_head()
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000001", 1)
    assert one.chain.gated and not one.holds_proposal_slot
    two = _item(2)
    chain.start(two)
    assert two.parent_id == "a000001" and "a = 5" in two.chain.head_text
    # One below the head moves nothing and keeps its slot.
    three = _item(3)
    chain.start(three)
    ctx.pool.add(Artifact("a000003", BASE.replace("b = 2", "b = 0"), ("a000001",), 0, {"combined_score": 0.6},
                          status="speculative"))
    chain.speculative_head(three, "a000003")
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000001", 1) and three.holds_proposal_slot


def test_a_removed_speculative_head_steps_back_and_work_from_it_is_carried_onto_the_best():
    ctx, chain, _ = _speculative_head()
    two = _item(2)
    chain.start(two)
    two.proposal = Proposal(child=BASE.replace("a = 1", "a = 5").replace("c = 3", "c = 9"))
    ctx.pool.set_status("a000001", "removed")
    chain.head_removed("a000001")
    assert (ctx.chain.head_base, ctx.chain.seq) == ("a000000", 2)
    # The step's own edit goes onto the best; the removed program's edit does not.
    assert chain.rebase(two) == ""
    assert two.proposal.child.strip() == BASE.replace("c = 3", "c = 9").strip() and two.parent_id == "a000000"


@pytest.mark.parametrize("full, head, seq", [(0.4, "a000000", 2), (0.65, "a000001", 1)])
def test_a_speculative_head_confirmed_below_the_best_steps_back(full: float, head: str, seq: int):
    """Its full cascade below the seed's 0.5: the head steps back; above it: it stays the head."""
    ctx, chain, one = _speculative_head()
    ctx.pool.set_status("a000001", "confirmed", {"combined_score": full})
    chain.committed(one, "a000001", full)
    assert (ctx.chain.head_base, ctx.chain.seq) == (head, seq)
