"""Merges of pool artifacts (GEPA's merge for text): the three-way line merge, pair selection,
and merge items running through the real engine against the scripted LLM."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.context import MergeState
from engine.pool import Artifact, Pool
from engine.selection.merge import ancestors, differing_examples, pick_pair, three_way
from tests.engine.fakes import VAL_KEYWORDS, completion, harness, until  # noqa: F401  (harness is a fixture)

BASE = "line one\nline two\nline three"


def test_two_appends_keep_both_ours_first() -> None:
    assert three_way(BASE, BASE + "\nours", BASE + "\ntheirs") == BASE + "\nours\ntheirs"


def test_edits_to_different_lines_are_both_applied() -> None:
    ours = "line ONE\nline two\nline three"
    theirs = "line one\nline two\nline THREE"
    assert three_way(BASE, ours, theirs) == "line ONE\nline two\nline THREE"


def test_a_deletion_and_an_append_elsewhere_combine() -> None:
    assert three_way(BASE, "line one\nline three", BASE + "\nmore") == "line one\nline three\nmore"


def test_the_same_edit_on_both_sides_adds_nothing() -> None:
    same = BASE + "\nshared"
    assert three_way(BASE, same, same) is None


def test_one_side_holding_the_others_edits_adds_nothing() -> None:
    assert three_way(BASE, BASE + "\na\nb", BASE + "\na") is None
    assert three_way(BASE, BASE, BASE + "\na") is None


def test_different_rewrites_of_one_line_conflict() -> None:
    assert three_way(BASE, "line one\nline 2\nline three", "line one\nline II\nline three") is None


def test_deleting_a_line_the_other_side_rewrote_conflicts() -> None:
    assert three_way(BASE, "line one\nline three", "line one\nline TWO\nline three") is None


def test_an_insertion_inside_a_rewritten_range_conflicts() -> None:
    ours = "line one\nX\nY"  # rewrites lines two and three
    theirs = "line one\nline two\ninserted\nline three"
    assert three_way(BASE, ours, theirs) is None


lines = st.lists(st.text(alphabet="abcdef ", min_size=1, max_size=6), min_size=0, max_size=6)


@settings(max_examples=200, deadline=None)
@given(base=lines, mine=lines, other=lines)
def test_appends_merge_to_base_plus_both_additions(base, mine, other) -> None:
    """Property: two descendants that only append lines merge to the base followed by both
    additions (repeats of ours dropped from theirs), or None when that adds nothing to either."""
    b, o, t = "\n".join(base), "\n".join(base + mine), "\n".join(base + other)
    merged = three_way(b, o, t)
    extra = [ln for ln in other if ln not in mine]
    expect = "\n".join(base + mine + extra)
    if expect.strip() in (o.strip(), t.strip()):
        assert merged is None
    elif merged is not None:  # difflib may align appended lines with base ones; then no claim
        assert merged == expect
    if mine == other or not other:
        assert merged is None


def _art(aid: str, parent: str | None, text: str, scores: dict[str, float]) -> Artifact:
    return Artifact(artifact_id=aid, text=text, parent_ids=(parent,) if parent else (), created_version=0,
                    val_scores=scores, status="seed" if parent is None else "confirmed", created_at=0.0)


def _pool() -> Pool:
    pool = Pool()
    pool.add(_art("s", None, BASE, {"e1": 0, "e2": 0, "e3": 0}))
    pool.add(_art("a", "s", BASE + "\nrule a", {"e1": 1, "e2": 0, "e3": 0}))
    pool.add(_art("b", "s", BASE + "\nrule b", {"e1": 0, "e2": 1, "e3": 0}))
    pool.add(_art("c", "a", BASE + "\nrule a\nrule c", {"e1": 1, "e2": 0, "e3": 1}))
    return pool


def test_ancestors_follow_first_parents_nearest_first() -> None:
    assert ancestors(_pool().get, "c") == ["c", "a", "s"]


def test_pick_pair_skips_ancestor_pairs_and_remembers_what_it_tried() -> None:
    pool, tried = _pool(), set()
    # a is c's ancestor: never merged with it; b and c share the seed
    found = pick_pair({"a": 1, "b": 1, "c": 2}, pool.get, tried, random.Random(0))
    assert found is not None
    ours, theirs, base, text = found
    assert {ours, theirs} == {"b", "c"} and base == "s" and ours == "c"  # the better one is ours
    assert text == BASE + "\nrule a\nrule c\nrule b"
    assert ("b", "c") in tried
    # next time the only new pair is a/b (equal means: the first id is ours)
    assert pick_pair({"a": 1, "b": 1, "c": 2}, pool.get, tried, random.Random(0)) == (
        "a", "b", "s", BASE + "\nrule a\nrule b")
    assert pick_pair({"a": 1, "b": 1, "c": 2}, pool.get, tried, random.Random(0)) is None


def test_differing_examples_come_first() -> None:
    pool = _pool()
    batch = differing_examples(pool.get("a"), pool.get("b"), ["e1", "e2", "e3"], 2, random.Random(1))
    assert sorted(batch) == ["e1", "e2"]


def test_merge_state_round_trips() -> None:
    state = MergeState(due=2, done=3, tried={("a", "b"), ("c", "d")})
    assert MergeState.from_dict(state.to_dict()) == state


# -- through the engine -------------------------------------------------------------------------

def _override_two_siblings(req):
    """Items 1 and 2 (both from the seed) each add their minibatch keywords plus one val keyword."""
    if req.stage != "propose" or req.item_id not in ("i000001", "i000002"):
        return None
    extra = "KEYWORD-alpha" if req.item_id == "i000001" else "KEYWORD-omega"
    lines = [req.current(), *(f"KEYWORD-{k}" for k in req.keywords()), extra]
    return completion("New instructions:\n```\n" + "\n".join(lines) + "\n```\n")


async def _run_with_siblings_first(harness, run):
    """Later proposals wait at rollout until a merge was admitted, so the proposal budget still
    has room when items 1 and 2 (the siblings) are both in the pool."""
    later = harness.fake.hold(lambda r: r.stage == "rollout" and r.item_id not in ("i000001", "i000002"))
    task = harness.start(run)
    await until(lambda: run.ctx.tally.merges_tried >= 1, what="a merge admitted")
    later.release()
    return await harness.finish(task)


async def test_async_merges_two_siblings_into_an_artifact_with_both_parents(harness) -> None:
    fake = harness.fake
    fake.override = _override_two_siblings
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2, "merge": True},
                               budget={"max_proposals": 4})
    result = await _run_with_siblings_first(harness, run)
    assert result.status == "completed"
    rid = run.ctx.run_id
    record = await harness.record(rid)
    merged = [a for a in record.artifacts if len(a["parent_ids"]) == 2]
    assert merged, "no merge artifact"
    m = merged[0]
    assert set(m["parent_ids"]) == {"a000001", "a000002"} and m["meta"]["merge_base"] == "a000000"
    assert "KEYWORD-alpha" in m["text"] and "KEYWORD-omega" in m["text"]
    lineage = [row for row in await harness.rows("lineage", rid) if row["child_id"] == m["artifact_id"]]
    assert {(row["parent_id"], row["operator"]) for row in lineage} == {("a000001", "merge"), ("a000002", "merge")}
    # a merge is no proposal: no rollout or propose request, and the proposal budget is untouched by it
    item = "i" + m["artifact_id"][1:]
    assert fake.of("rollout", item) == [] and fake.of("propose", item) == []
    assert run.ctx.tally.proposal_attempts == 4 and run.ctx.tally.merges_accepted >= 1
    assert run.ctx.merges.done == run.ctx.tally.merges_tried >= 1
    # gated on validation examples where the parents differ, then fully validated
    evals = fake.of("evaluate", item)
    n_val = len(run.ctx.task.val_ids)  # merge_minibatch_size 5 >= 4 examples: all of them, differing first
    assert len(evals) == 2 * n_val and {r.keyword() for r in evals[:n_val]} == set(VAL_KEYWORDS)
    assert m["val_scores"] and len(m["val_scores"]) == len(run.ctx.task.val_ids)


async def test_pxn_siblings_owe_merges_that_a_resumed_run_carries_out(harness) -> None:
    fake = harness.fake
    fake.override = _override_two_siblings
    # pxn, one parent x two mutations: items 1 and 2 are siblings of the seed; the budget ends
    # with the step, so the merges they are owed stay due (and are saved with the run state).
    run = await harness.create(pipeline={"mode": "pxn", "pxn_parents": 1, "pxn_mutations": 2, "merge": True},
                               budget={"max_proposals": 2})
    assert (await harness.finish(harness.start(run))).status == "completed"
    assert run.ctx.tally.merges_tried == 0 and run.ctx.merges.due == 2
    rid = run.ctx.run_id
    await run.close()
    resumed = await harness.resume(rid, {"max_proposals": 4})
    assert resumed.ctx.merges.due == 2  # restored from the run state
    assert (await harness.finish(harness.start(resumed))).status == "completed"
    assert resumed.ctx.tally.merges_tried >= 1
    merged = [a for a in resumed.ctx.pool.artifacts() if len(a.parent_ids) == 2]
    assert merged and set(merged[0].parent_ids) == {"a000001", "a000002"}


async def test_no_merge_when_disabled(harness) -> None:
    fake = harness.fake
    fake.override = _override_two_siblings
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2, "merge": False},
                               budget={"max_proposals": 4})
    await harness.finish(harness.start(run))
    assert run.ctx.tally.merges_tried == 0
    assert all(len(a.parent_ids) <= 1 for a in run.ctx.pool.artifacts())


async def test_a_merge_below_its_better_parent_on_the_gate_batch_is_rejected(harness) -> None:
    fake = harness.fake

    def override(req):
        if req.stage == "evaluate" and req.item_id and not fake.of("rollout", req.item_id):
            return completion("unknown")  # a merge (no rollout): worse than either parent everywhere
        return _override_two_siblings(req)

    fake.override = override
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2, "merge": True},
                               budget={"max_proposals": 4})
    result = await _run_with_siblings_first(harness, run)
    assert result.status == "completed"
    assert run.ctx.tally.merges_tried >= 1 and run.ctx.tally.merges_accepted == 0
    assert all(len(a.parent_ids) <= 1 for a in run.ctx.pool.artifacts())
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    merges = [i for i in items.values() if "merge" in (i["payload"] or {})]
    assert merges and all(i["outcome"] == "rejected" and i["error"].startswith("minibatch gate: 0.00 < parent")
                          for i in merges)
    # only the gate batch ran: no full validation of a rejected merge
    for i in merges:
        assert len(fake.of("evaluate", i["item_id"])) == len(i["payload"]["minibatch"])
