"""Mode chain (engine/capabilities/gated_chain.py): steps handed on at the gate, one shared head, background
validation with superseded heads skipped, rebase onto a head another chain moved, budget,
resume, and the configuration errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ConfigError, build_config
from engine.run.setup import SetupError, check_combination
from engine.tasks.loader import load_any_task
from tests.engine.fakes import SEED_PROMPT, TRAIN_KEYWORDS, VAL_KEYWORDS, completion, harness, until  # noqa: F401
from tests.engine.test_run_state import attached_snapshot

# Minibatches hold every training example, so a candidate that adds a keyword always passes.
CHAIN = {"mode": "chain", "minibatch_size": len(TRAIN_KEYWORDS)}


def fenced(*lines: str):
    return completion("Reasoning: edited.\n```\n" + "\n".join(lines) + "\n```\n")


def add_next_keyword(req):
    """Proposals add the first training keyword the current instructions lack."""
    if req.stage != "propose":
        return None
    current = req.current()
    kw = next(k for k in TRAIN_KEYWORDS if f"KEYWORD-{k}" not in current)
    return fenced(current, f"KEYWORD-{kw}")


def stages_of(rows: list[dict], item_id: str) -> list[str]:
    return [r["stage"] for r in rows if r["item_id"] == item_id]


async def test_the_gate_hands_the_next_step_its_traces(harness) -> None:
    fake = harness.fake
    fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 3})
    result = await harness.run_to_end(run)
    assert result.status == "completed" and result.summary["proposal_attempts"] == 3
    rid = run.ctx.run_id
    stage_rows = await harness.rows("item_stages", rid)
    # Only the chain's first item rolls out; the others start at propose.
    assert stages_of(stage_rows, "i000001")[0] == "rollout"
    for iid in ("i000002", "i000003"):
        assert "rollout" not in stages_of(stage_rows, iid) and stages_of(stage_rows, iid)[0] == "propose"
    items = {i["item_id"]: i for i in await harness.rows("items", rid)}
    assert items["i000002"]["payload"]["chain_of"] == "i000001"
    assert items["i000003"]["payload"]["chain_of"] == "i000002"
    # Item 2 proposes from item 1's candidate, with that candidate's traces on its minibatch.
    child1 = run.ctx.pool.get("a000001").text
    (prop2,) = fake.of("propose", "i000002")
    assert prop2.current() == child1 and sorted(prop2.keywords()) == sorted(TRAIN_KEYWORDS)
    # Item 1's gate: the candidate on two minibatches, the head (the seed) on the second.
    seed_runs = [r for r in fake.of("rollout", "i000001") if r.system == SEED_PROMPT]
    assert len(seed_runs) == 2 * len(TRAIN_KEYWORDS)  # its own rollout, then the head on the next minibatch
    evals = fake.of("evaluate", "i000001")
    assert len(evals) == 2 * len(TRAIN_KEYWORDS) + len(VAL_KEYWORDS) and all(r.system == child1 for r in evals)
    # Every head was validated in full and the lineage is a line.
    arts = {a.artifact_id: a for a in run.ctx.pool.confirmed()}
    assert sorted(arts) == ["a000000", "a000001", "a000002", "a000003"]
    assert [arts[a].parent_ids for a in ("a000001", "a000002", "a000003")] == [("a000000",), ("a000001",), ("a000002",)]
    assert all(len(arts[a].val_scores) == len(VAL_KEYWORDS) for a in arts)
    assert arts["a000003"].text.count("KEYWORD-") == 3
    assert run.ctx.chain.head_chain == [] and run.ctx.chain.head_base == "a000003"


async def test_a_rejected_candidate_hands_the_chain_on_from_its_head(harness) -> None:
    fake = harness.fake
    fake.override = lambda req: (fenced(req.current(), "NOTE-useless") if (req.stage, req.item_id) == ("propose", "i000001")
                                 else add_next_keyword(req))
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 2})
    assert (await harness.run_to_end(run)).status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000001"]["outcome"] == "rejected" and items["i000001"]["payload"]["reason"].startswith("minibatch gate")
    assert items["i000002"]["payload"]["chain_of"] == "i000001"
    (prop2,) = fake.of("propose", "i000002")
    assert prop2.current() == SEED_PROMPT  # the head did not move
    assert items["i000002"]["outcome"] == "accepted" and "a000001" not in run.ctx.pool


async def test_a_head_superseded_before_its_validation_is_skipped(harness) -> None:
    fake = harness.fake
    fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 1, "chain_validators": 1}, budget={"max_proposals": 3})
    hold = fake.hold(lambda r: (r.stage, r.item_id, r.keyword()) == ("evaluate", "i000001", "omega"))
    task = harness.start(run)
    await until(lambda: run.ctx.chain.head_chain[:1] == ["i000003"], what="item 3 holds the head")
    assert run.ctx.chain.head_chain == ["i000003", "i000002", "i000001"]
    hold.release()
    result = await harness.finish(task)
    assert result.status == "completed" and run.ctx.tally.superseded == 1
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert [items[i]["outcome"] for i in ("i000001", "i000002", "i000003")] == ["accepted", "superseded", "accepted"]
    assert "i000003" in items["i000002"]["payload"]["reason"]
    assert not any(r.keyword() == "omega" for r in fake.of("evaluate", "i000002"))  # never validated
    pool = run.ctx.pool
    assert "a000002" not in pool and pool.get("a000003").parent_ids == ("a000001",)  # nearest validated head
    assert pool.get("a000003").text.count("KEYWORD-") == 3


async def two_chains_item_2_gated_after_item_1(harness, lines: dict[str, str]):
    """Two chains from the seed; item 2 proposes only once item 1 has moved the head.
    `lines`: the line each item's proposal adds."""
    harness.fake.override = lambda req: fenced(req.current(), lines[req.item_id]) if req.stage == "propose" else None
    run = await harness.create(pipeline={**CHAIN, "chains": 2}, budget={"max_proposals": 2})
    hold = harness.fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000002"))
    task = harness.start(run)
    # seq counts new heads; item 1 passing its gate is the first (its validation may also be done).
    await until(lambda: run.ctx.chain.seq >= 1 and bool(hold.arrived), what="item 1 moved the head")
    hold.release()
    assert (await harness.finish(task)).status == "completed"
    return run


async def test_a_candidate_passing_after_another_chain_moved_the_head_is_rebased(harness) -> None:
    run = await two_chains_item_2_gated_after_item_1(harness, {"i000001": "KEYWORD-alpha", "i000002": "KEYWORD-beta"})
    a2 = run.ctx.pool.get("a000002")
    assert "KEYWORD-alpha" in a2.text and "KEYWORD-beta" in a2.text
    assert a2.meta["rebased"]["mechanical"] is True and a2.meta["rebased"]["to_seq"] == 1
    assert a2.parent_ids == ("a000001",) and run.ctx.staleness_counts["chain_rebase"] == 1
    assert run.ctx.chain.head_base == "a000002" and run.ctx.chain.head_chain == []  # it holds the head


async def test_a_candidate_that_does_not_apply_to_the_newer_head_is_rejected_without_its_gate(harness) -> None:
    # Both add the same line: rebasing item 2's edit onto item 1's head adds nothing, so its gate
    # could not change the outcome. Only the gate's head side runs: the chain's next traces.
    run = await two_chains_item_2_gated_after_item_1(harness, {"i000001": "KEYWORD-alpha", "i000002": "KEYWORD-alpha"})
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000002"]["outcome"] == "rejected"
    assert "does not apply to the newer head" in items["i000002"]["payload"]["reason"]
    assert "not gated" in items["i000002"]["payload"]["reason"]
    assert harness.fake.of("evaluate", "i000002") == []  # the candidate never ran
    head_side = harness.fake.of("rollout", "i000002")[len(TRAIN_KEYWORDS):]  # after the chain's first rollout
    assert len(head_side) == len(TRAIN_KEYWORDS) and all("KEYWORD-alpha" in r.system for r in head_side)
    assert run.ctx.staleness_counts["chain_unjoinable"] == 1 and run.ctx.staleness_counts["chain_rebase"] == 0


async def test_a_candidate_whose_edit_a_head_made_during_its_gate_is_rejected_after_it(harness) -> None:
    """The head moves while item 2's gate runs (its answers are held): the gate passes, and the
    rebase then finds item 1's head holding the same edit."""
    fake = harness.fake
    fake.override = lambda req: fenced(req.current(), "KEYWORD-alpha") if req.stage == "propose" else None
    run = await harness.create(pipeline={**CHAIN, "chains": 2}, budget={"max_proposals": 2})
    hold1 = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000001"))
    hold2 = fake.hold(lambda r: (r.stage, r.item_id) == ("evaluate", "i000002"))
    task = harness.start(run)
    await until(lambda: bool(hold2.arrived) and run.ctx.chain.seq == 0, what="item 2's gate on the seed")
    hold1.release()
    await until(lambda: run.ctx.chain.seq >= 1, what="item 1 moved the head")
    hold2.release()
    assert (await harness.finish(task)).status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000002"]["outcome"] == "rejected"
    assert items["i000002"]["payload"]["reason"].startswith("passed its gate but does not apply to the newer head")
    assert len(fake.of("evaluate", "i000002")) == 2 * len(TRAIN_KEYWORDS)
    assert run.ctx.staleness_counts["chain_unjoinable"] == 0
    assert "a000002" not in run.ctx.pool


async def test_chains_spend_exactly_the_proposal_budget_and_leave_nothing_open(harness) -> None:
    harness.fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 3}, budget={"max_proposals": 5})
    result = await harness.run_to_end(run)
    assert result.status == "completed" and result.summary["proposal_attempts"] == 5
    record = await harness.record(run.ctx.run_id)
    assert record.open_items == []
    # The confirmed pool holds fully validated artifacts only.
    assert all(len(a.val_scores) == len(VAL_KEYWORDS) for a in run.ctx.pool.confirmed())
    assert run.orchestrator.proposing == 0


async def test_resume_continues_from_the_saved_head(harness) -> None:
    harness.fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 2}, budget={"max_proposals": 3})
    assert (await harness.run_to_end(run)).status == "completed"
    saved = run.ctx.chain.to_dict()
    assert saved["seq"] >= 1 and saved["head_text"].count("KEYWORD-") >= 1
    again = await harness.resume(run.ctx.run_id, {"max_proposals": 5})
    assert again.ctx.chain.to_dict() == saved
    result = await harness.run_to_end(again)
    assert result.status == "completed" and result.summary["proposal_attempts"] == 5
    first_new = next(r for r in harness.fake.of("rollout") if r.item_id == "i000004" or r.item_id == "i000005")
    assert first_new.system.startswith(SEED_PROMPT) and "KEYWORD-" in first_new.system  # the saved head, not the seed


def test_chain_refuses_async_only_options() -> None:
    with pytest.raises(ConfigError, match="policy 'guarded' applies to mode async"):
        build_config([("test", {"pipeline": {"mode": "chain", "policy": "guarded"}})])


def test_chain_refuses_speculation_on_prompt_tasks() -> None:
    """A prompt chain hands candidates on at its gate; speculation in mode chain is for programs."""
    config = build_config([("test", {"pipeline": {"mode": "chain", "speculation": True}})])
    with pytest.raises(SetupError, match="speculation in mode chain applies to program tasks; it hands prompt candidates on at the minibatch gate"):
        check_combination(config, load_any_task("rules"))


async def test_runtime_switches_to_async_only_features_are_refused(harness) -> None:
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 1})
    with pytest.raises(ValueError, match="mode chain"):
        run.set_policy("reflective")
    with pytest.raises(ValueError, match="mode chain"):
        run.set_speculation(True)
    assert (await harness.run_to_end(run)).status == "completed"


async def test_a_head_interrupted_in_validation_resumes_without_a_second_gate(harness) -> None:
    fake = harness.fake
    fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 3})
    hold_val = fake.hold(lambda r: (r.stage, r.item_id, r.keyword()) == ("evaluate", "i000001", "omega"))
    hold_prop = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000002"))
    task = harness.start(run)
    await until(lambda: hold_val.arrived and hold_prop.arrived, what="item 1 validating, item 2 proposing")
    run.stop()
    assert (await harness.finish(task)).status == "interrupted"
    before = {i["item_id"]: i for i in (await harness.record(run.ctx.run_id)).open_items}
    assert {k: v["stage"] for k, v in before.items()} == {"i000001": "evaluate", "i000002": "propose"}
    assert before["i000001"]["payload"]["gated"] is True
    n_first = len(fake.requests)
    fake.gates.clear()
    again = await harness.resume(run.ctx.run_id)
    assert again.ctx.chain.head_chain[0] == "i000001"
    assert (await harness.run_to_end(again)).status == "completed"
    later = fake.requests[n_first:]
    mine = [r for r in later if r.item_id == "i000001"]
    assert {r.stage for r in mine} == {"evaluate"} and len(mine) == len(VAL_KEYWORDS)  # validation only
    chain_of = {i["item_id"]: i["payload"].get("chain_of") for i in await harness.rows("items", run.ctx.run_id)}
    assert list(chain_of.values()).count("i000001") == 1  # one successor: the chain did not fork
    assert again.ctx.tally.proposal_attempts == 3


async def test_a_review_shows_a_chain_proposal_against_its_head(harness) -> None:
    harness.fake.override = add_next_keyword
    run = await harness.create(pipeline={**CHAIN, "chains": 1, "review_before_evaluate": True},
                               budget={"max_proposals": 2})
    task = harness.start(run)
    await until(lambda: run.review.pending(), what="item 1 parked")
    run.review.decide("i000001", "approve")
    await until(lambda: [p.item_id for p in run.review.pending()] == ["i000002"], what="item 2 parked")
    (pending,) = run.review.pending()
    head = run.ctx.chain.head_text
    assert pending.parent_text == head != SEED_PROMPT and pending.child_text.startswith(head + "\n")
    run.review.decide("i000002", "approve")
    assert (await harness.finish(task)).status == "completed"


async def test_the_head_runs_on_the_next_minibatch_in_the_gate(harness) -> None:
    """The head's runs on the next minibatch start in the gate, beside the candidate's, not with
    the proposal; the minibatch drawn is stored with the gated item (a resume reuses it)."""
    import asyncio

    fake = harness.fake
    fake.override = add_next_keyword
    held = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000001"))
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 2})
    done = asyncio.ensure_future(harness.run_to_end(run))

    def seed_runs() -> int:
        return len([r for r in fake.of("rollout", "i000001") if r.system == SEED_PROMPT])

    await until(lambda: bool(held.arrived), timeout=30, what="the held proposal")
    n = len(TRAIN_KEYWORDS)
    await until(lambda: seed_runs() == n, timeout=30, what="the head's rollout")
    held.release()
    assert (await done).status == "completed"
    assert seed_runs() == 2 * n  # its own rollout and the head on the next minibatch
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert len(items["i000001"]["payload"]["next_mb"]) == n


_DROPS_ALPHA = {"i000001": lambda cur: fenced(cur, "KEYWORD-alpha"),
                "i000002": lambda cur: fenced(SEED_PROMPT, "KEYWORD-beta", "KEYWORD-delta"),
                "i000003": lambda cur: fenced("KEYWORD-gamma", cur)}


def item_2_drops_alpha(req):
    """Item 1 adds alpha; item 2 swaps it for beta and delta (passes its gate, worse on validation);
    item 3 adds gamma in front of what it was given."""
    return _DROPS_ALPHA[req.item_id](req.current()) if req.stage == "propose" else None


async def test_the_chain_builds_on_a_head_that_passed_its_gate_even_if_it_validates_worse(harness) -> None:
    """Minibatch gates decide the head; a head that validates below the best stays (GEPA's
    selection would not pick it again; a revert was measured to change nothing and removed)."""
    fake = harness.fake
    fake.override = item_2_drops_alpha
    run = await harness.create(pipeline={**CHAIN, "chains": 1}, budget={"max_proposals": 3})
    assert (await harness.run_to_end(run)).status == "completed"
    a3 = run.ctx.pool.get("a000003")
    assert "KEYWORD-beta" in a3.text and "KEYWORD-alpha" not in a3.text


@pytest.mark.parametrize("width", [None, 2])
async def test_validation_width_caps_a_head_s_validation_rollouts_in_flight(harness, width) -> None:
    """chain_validation_width: at most that many of a head's validation rollouts wait on the
    server at once (the rest follow as they finish); None sends them all together."""
    import asyncio

    fake = harness.fake
    fake.override = add_next_keyword
    gate_runs = 2 * len(TRAIN_KEYWORDS)  # the candidate on its minibatch and on the next one
    seen: list[int] = []

    def val(r) -> bool:
        """Item 1's evaluate requests after its gate's: its validation rollouts."""
        if (r.stage, r.item_id) != ("evaluate", "i000001"):
            return False
        seen.append(r.seq)
        return len(seen) > gate_runs

    held = fake.hold(val)
    run = await harness.create(pipeline={**CHAIN, "chains": 1, "chain_validation_width": width},
                               budget={"max_proposals": 1})
    done = asyncio.ensure_future(harness.run_to_end(run))
    expected = len(VAL_KEYWORDS) if width is None else width
    await until(lambda: len(held.arrived) >= expected, timeout=30, what="the first validation rollouts")
    await asyncio.sleep(0.05)  # nothing more arrives while those are held
    assert len(held.arrived) == expected
    held.release()
    assert (await done).status == "completed"
    validation = fake.of("evaluate", "i000001")[gate_runs:]
    assert sorted(r.keyword() for r in validation) == sorted(VAL_KEYWORDS)


@pytest.mark.parametrize("early", [True, False])
async def test_a_gate_certain_before_its_last_answers_hands_on_and_cancels_them(harness, early) -> None:
    """Item 1's candidate states every training keyword, the head (the seed) none: its own answers
    already outscore anything the head could reach on the next minibatch. With chain_early_gate
    (the default) the step is handed on while the head's runs there are still held and those runs
    are cancelled; without it the gate waits for them."""
    import asyncio

    fake = harness.fake
    every = [f"KEYWORD-{k}" for k in TRAIN_KEYWORDS]
    fake.override = lambda req: (fenced(req.current(), *every) if (req.stage, req.item_id) == ("propose", "i000001")
                                 else add_next_keyword(req) if req.stage == "propose" else None)
    n = len(TRAIN_KEYWORDS)
    seen: list[int] = []

    def head_on_next(r) -> bool:
        """The seed's runs for item 1 after its own rollout: the head on the next minibatch."""
        if (r.stage, r.item_id, r.system) != ("rollout", "i000001", SEED_PROMPT):
            return False
        seen.append(r.seq)
        return len(seen) > n

    held = fake.hold(head_on_next)
    run = await harness.create(pipeline={**CHAIN, "chains": 1, "chain_early_gate": early}, budget={"max_proposals": 1})
    done = asyncio.ensure_future(harness.run_to_end(run, timeout=30))
    await until(lambda: len(held.arrived) == n, timeout=30, what="the head's runs on the next minibatch")
    if not early:
        await until(lambda: len(fake.of("evaluate", "i000001")) == 2 * n, timeout=30, what="the candidate's gate runs")
        await asyncio.sleep(0.05)
        assert not done.done() and len(fake.of("evaluate", "i000001")) == 2 * n  # no validation before the gate ends
        held.release()
    result = await done
    assert result.status == "completed" and result.summary["accepted"] == 1
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000001"]["outcome"] == "accepted"
    assert items["i000001"]["payload"].get("gate_cancelled") == (n if early else None)
    assert run.ctx.staleness_counts["chain_early_gate"] == (1 if early else 0)
    # Validated in full either way; early, the held runs were never answered.
    art = run.ctx.pool.best()
    assert art.val_mean > 0 and len(art.val_scores) == len(VAL_KEYWORDS)
    assert held.event.is_set() is (not early)


@pytest.mark.parametrize("current", [True, False])
async def test_a_failing_step_goes_on_from_the_head_another_chain_moved(harness, current) -> None:
    """Item 2 was made from the seed; item 1 moved the head meanwhile. With
    chain_gate_current_head, item 2's gate runs the moved head on the next minibatch and its
    chain goes on from that head; without, from the seed it was made from."""
    fake = harness.fake
    lines = {"i000001": "KEYWORD-alpha", "i000002": "NOTE-useless"}
    fake.override = lambda req: (fenced(req.current(), lines[req.item_id]) if req.stage == "propose" and req.item_id in lines
                                 else add_next_keyword(req))
    run = await harness.create(pipeline={**CHAIN, "chains": 2, "chain_gate_current_head": current},
                               budget={"max_proposals": 4})
    hold2 = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000002"))
    hold3 = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000003"))  # the head stays at item 1's
    task = harness.start(run)
    await until(lambda: run.ctx.chain.seq >= 1 and bool(hold2.arrived), what="item 1 moved the head")
    moved = run.ctx.chain.head_text
    assert "KEYWORD-alpha" in moved and hold2.arrived[0].current() == SEED_PROMPT
    hold2.release()
    await until(lambda: bool(fake.of("propose", "i000004")), what="item 2's chain goes on")
    hold3.release()
    assert (await harness.finish(task)).status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000002"]["outcome"] == "rejected" and items["i000004"]["payload"]["chain_of"] == "i000002"
    expected = moved if current else SEED_PROMPT
    gate_head_runs = fake.of("rollout", "i000002")[len(TRAIN_KEYWORDS):]  # after the chain's first rollout
    assert len(gate_head_runs) == len(TRAIN_KEYWORDS) and all(r.system == expected for r in gate_head_runs)
    (prop4,) = fake.of("propose", "i000004")
    assert prop4.current() == expected
    # Counted per gate that ran a moved head (item 3, released last, may be another).
    assert (run.ctx.staleness_counts["chain_current_head"] >= 1) is current


async def test_the_chain_count_starts_at_its_floor_grows_and_a_collision_retires_a_chain(harness) -> None:
    """chains_min 1, chains 2: one chain starts; item 1's clean step adds a second chain (item 3,
    admitted fresh beside item 1's successor, item 2); items 2 and 3 make the same edit from the
    same head, so item 3 collides once item 2 has moved it, the count drops back to 1, and item
    3's chain ends at its hand-on instead of going on (the budget had room for its next step)."""
    fake = harness.fake
    lines = {"i000001": "KEYWORD-alpha", "i000002": "KEYWORD-beta", "i000003": "KEYWORD-beta"}
    fake.override = lambda req: (fenced(req.current(), lines.get(req.item_id, f"KEYWORD-{req.item_id}"))
                                 if req.stage == "propose" else None)
    run = await harness.create(pipeline={**CHAIN, "chains": 2, "chains_min": 1, "chain_grow_after": 1},
                               budget={"max_proposals": 5})
    assert run.snapshot().chain_count == 1  # before the first admission: the floor, as admission reads it
    hold3 = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000003"))
    hold4 = fake.hold(lambda r: (r.stage, r.item_id) == ("propose", "i000004"))
    task = harness.start(run)
    await until(lambda: run.ctx.chain.seq >= 2 and bool(hold3.arrived), what="item 2 moved the head")
    assert run.ctx.chain.count == 2
    hold3.release()
    await until(lambda: run.ctx.staleness_counts["chain_unjoinable"] >= 1, what="item 3 collided")
    assert run.ctx.chain.count == 1 and run.ctx.staleness_counts["chain_retired"] == 1
    snap = run.snapshot()  # what the TUI's gaps panel shows (evotui/tui/widgets/panels.py)
    assert (snap.chain_count, snap.chains_min, snap.chains_max) == (1, 1, 2)
    assert snap.chains_running == run.orchestrator.proposing >= 1
    hold4.release()
    assert (await harness.finish(task)).status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    # One chain at the start: item 2 is item 1's next step, not a second fresh chain.
    assert items["i000002"]["payload"]["chain_of"] == "i000001" and "chain_of" not in items["i000003"]["payload"]
    assert items["i000003"]["outcome"] == "rejected" and "not gated" in items["i000003"]["payload"]["reason"]
    assert items["i000004"]["payload"]["chain_of"] == "i000002"
    assert not any(i["payload"].get("chain_of") == "i000003" for i in items.values())  # its chain ended
    assert len(items) == 5 and run.ctx.chain.to_dict()["count"] == 2  # item 4's clean step added one back
    # Attached to the database (no control socket), the count and its bounds read the same.
    stored = await attached_snapshot(harness.db, run.ctx.run_id)
    assert (stored.chain_count, stored.chains_min, stored.chains_max, stored.chains_running) == (2, 1, 2, 0)
