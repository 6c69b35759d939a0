"""RunState (engine/run/state.py): one serializer, old states load, a resumed run keeps its
counters, and the stored snapshot (attach) agrees with the live one (engine/run/snapshot.py)."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.code.filters import ProgramFilters
from engine.run.state import ChainState, MergeState, ProgramCounters, RunState, Tally
from engine.selection.pareto import rng_state
from engine.run.snapshot import EngineSnapshot
from evotui.control import snapshot_from_dict, snapshot_to_dict
from evotui.tui.attach import AttachBackend
from tests.engine.fakes import harness, until  # noqa: F401

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v2_interrupted_run.db"

# -- the serializer -------------------------------------------------------------------------------

ids = st.text("abcdefgh0123456789", min_size=1, max_size=8)
counts = st.integers(min_value=0, max_value=10**9)
TALLY_INTS = [k for k, v in Tally().__dict__.items() if not isinstance(v, Counter)]
TALLY_COUNTERS = [k for k, v in Tally().__dict__.items() if isinstance(v, Counter)]


@st.composite
def run_states(draw) -> RunState:
    tally = Tally(**{k: draw(counts) for k in TALLY_INTS},
                  **{k: Counter(draw(st.dictionaries(st.text(max_size=20), counts, max_size=4))) for k in TALLY_COUNTERS})
    val_ids = draw(st.lists(ids, max_size=5, unique=True))
    return RunState(
        tally=tally,
        merges=MergeState(draw(counts), draw(counts), draw(st.sets(st.tuples(ids, ids), max_size=5))),
        chain=ChainState(draw(st.text(max_size=30)), draw(ids), draw(st.lists(ids, max_size=4)), draw(counts),
                         draw(counts), draw(counts)),
        gap_histogram=Counter(draw(st.dictionaries(st.integers(0, 50), counts, max_size=6))),
        staleness_counts=Counter(draw(st.dictionaries(
            st.sampled_from(["pass", "discard", "reflect", "reflect_keep", "reflect_patch", "chain_rebase"]),
            counts, max_size=6))),
        item_seq=draw(counts),
        program=ProgramCounters(draw(counts), draw(counts), Counter(draw(st.dictionaries(
            st.sampled_from(["no_op", "length", "duplicate", "syntax", "region"]), counts, max_size=5)))),
        budget=draw(st.dictionaries(st.sampled_from(["proposals", "llm_calls", "tokens", "metric_calls", "wall_s"]),
                                    st.floats(0, 1e9, allow_nan=False), max_size=5)),
        budget_limits=draw(st.dictionaries(st.sampled_from(["proposals", "tokens", "wall_s"]),
                                           st.none() | st.floats(1, 1e9, allow_nan=False), max_size=3)),
        rng=draw(st.none() | st.integers(0, 2**32).map(lambda s: rng_state(random.Random(s)))),
        sampler=draw(st.none() | st.builds(lambda o, p: {"order": o, "pos": p}, st.lists(ids, max_size=5), counts)),
        val_order=draw(st.none() | st.just({"order": val_ids, "streak": {v: 0 for v in val_ids}})),
    )


@settings(max_examples=150, deadline=None)
@given(run_states())
def test_a_run_state_survives_its_serializer_and_the_json_columns(state: RunState) -> None:
    assert RunState.from_dict(state.to_dict()) == state
    # The real path: two JSON columns, keys sorted (engine/store/codec.py), read back.
    columns = {k: json.loads(json.dumps(v, sort_keys=True)) for k, v in state.to_columns().items()}
    assert RunState.from_columns(columns["rng_state_json"], columns["counters_json"]) == state


PREVIOUS_RELEASE = {  # what Recorder.save_run_state wrote before RunState
    "rng_state_json": {"rng": rng_state(random.Random(7)), "sampler": {"order": ["t1", "t0"], "pos": 1},
                       "item_seq": 12, "merges": {"due": 2, "done": 1, "tried": [["a000001", "a000003"]]},
                       "chain": {"head_text": "", "head_base": "", "head_chain": [], "seq": 0},
                       "val_order": {"order": ["v1", "v0"], "streak": {"v0": 0, "v1": 2}}},
    "counters_json": {"budget": {"proposals": 12.0, "llm_calls": 40.0, "tokens": 900.0, "metric_calls": 30.0,
                                 "wall_s": 3.5},
                      "tally": {"proposals": 11, "accepted": 4, "rejected": 6, "fail_reasons": {"LLM error": 1},
                                "retired_counter": 3}},
}


def test_a_state_the_previous_release_saved_loads_and_saves_back_key_compatibly() -> None:
    old = PREVIOUS_RELEASE
    state = RunState.from_columns(old["rng_state_json"], old["counters_json"])
    assert (state.tally.proposals, state.tally.accepted, state.tally.fail_reasons) == (11, 4, Counter({"LLM error": 1}))
    assert state.item_seq == 12 and state.merges == MergeState(2, 1, {("a000001", "a000003")})
    assert state.budget["wall_s"] == 3.5 and state.rng == old["rng_state_json"]["rng"]
    assert state.sampler == {"order": ["t1", "t0"], "pos": 1} and state.val_order["streak"] == {"v0": 0, "v1": 2}
    # Counters the previous release did not store start empty.
    assert state.gap_histogram == Counter() and state.staleness_counts == Counter() and state.program == ProgramCounters()
    # Saved again, every key the previous release wrote is where it was (its readers still work).
    new = state.to_columns()
    for column, old_value in old.items():
        for key, value in old_value.items():
            if key == "chain":  # newer keys beside the old ones (the adaptive chain count)
                assert {k: new[column][key][k] for k in value} == value, (column, key)
            elif key != "tally":
                assert new[column][key] == value, (column, key)
    assert {k: v for k, v in new["counters_json"]["tally"].items() if k in old["counters_json"]["tally"]} == {
        k: v for k, v in old["counters_json"]["tally"].items() if k != "retired_counter"}


# -- the adaptive chain count ---------------------------------------------------------------------


def test_collisions_take_chains_away_and_clean_steps_add_them_back() -> None:
    ch = ChainState()
    ch.after_step(False, floor=6, top=10, grow_after=3)
    assert (ch.count, ch.clean_steps) == (6, 1)  # an unset count starts at the floor
    ch.after_step(False, 6, 10, 3)
    ch.after_step(False, 6, 10, 3)
    assert (ch.count, ch.clean_steps) == (7, 0)  # three clean steps in a row: one more chain
    ch.after_step(False, 6, 10, 3)
    ch.after_step(True, 6, 10, 3)
    assert (ch.count, ch.clean_steps) == (6, 0)  # a collision: one fewer, and the run starts over
    ch.after_step(True, 6, 10, 3)
    assert ch.count == 6  # never below the floor
    ch.count = 12  # a resume under a smaller `chains`
    ch.after_step(False, 6, 10, 3)
    assert ch.count == 10


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=60), st.integers(1, 8), st.integers(0, 8), st.integers(1, 5))
def test_the_chain_count_stays_within_its_bounds(steps: list[bool], floor: int, extra: int, grow_after: int) -> None:
    top, ch = floor + extra, ChainState()
    for collided in steps:
        before = ch.count or floor
        ch.after_step(collided, floor, top, grow_after)
        assert floor <= ch.count <= top and 0 <= ch.clean_steps < grow_after
        assert ch.count == (max(floor, before - 1) if collided else before + (ch.clean_steps == 0 and before < top))


def test_the_v2_fixtures_stored_state_loads() -> None:
    con = sqlite3.connect(FIXTURE)
    try:
        rng_json, counters_json = con.execute("SELECT rng_state_json, counters_json FROM runs").fetchone()
    finally:
        con.close()
    rng, counters = json.loads(rng_json), json.loads(counters_json)
    state = RunState.from_columns(rng, counters)
    assert state.tally.to_dict() == {**Tally().to_dict(), **counters["tally"]}
    assert state.item_seq == rng["item_seq"] and state.rng == rng["rng"] and state.sampler == rng["sampler"]
    assert state.budget == {k: float(v) for k, v in counters["budget"].items()}


# -- program counters -----------------------------------------------------------------------------


def test_filters_count_into_the_run_state_they_are_given() -> None:
    state = RunState()
    filters = ProgramFilters(counts=state.program.filter_counts)
    filters.check("x = 1\n", "x = 1\n")
    assert state.program.filter_counts == Counter({"no_op": 1})
    assert ProgramFilters().counts is not ProgramFilters().counts  # the default stays private


# -- a resumed run ---------------------------------------------------------------------------------


async def _counts_of_rows(harness, run_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """The gap histogram and staleness counts the staleness rows (the lossless record) imply:
    one row per check at a checked stage, one per reflect verdict (as reflect_<verdict>)."""
    rows = await harness.rows("staleness", run_id)
    gaps = Counter(str(r["gap"]) for r in rows if r["stage"] != "reflect")
    decisions = Counter(r["decision"] if r["stage"] != "reflect" else f"reflect_{r['decision']}" for r in rows)
    return dict(gaps), dict(decisions)


async def _run_with_stale_items(harness, run):
    """Items 2 and 3 wait after proposing until item 1 is in the pool: they reach evaluate at gap 1."""
    hold = harness.fake.hold(lambda r: r.stage == "propose" and r.item_id in ("i000002", "i000003"))
    task = harness.start(run)
    await until(lambda: run.ctx.pool.version == 2 and len(hold.arrived) == 2, what="item 1 committed, 2 and 3 held")
    hold.release()
    return await harness.finish(task)


@pytest.mark.parametrize("policy", ["guarded", "reflective"])
async def test_a_resumed_runs_staleness_counts_are_those_of_its_rows(harness, policy) -> None:
    """Run N proposals, then resume the finished run to 2N: the summary counts both sessions."""
    pipeline = {"mode": "async", "max_in_flight": 3, "policy": policy, "max_gap": 0}
    run = await harness.create(pipeline=pipeline, budget={"max_proposals": 6})
    first = await _run_with_stale_items(harness, run)
    run_id = run.ctx.run_id
    gaps1, decisions1 = await _counts_of_rows(harness, run_id)
    assert first.status == "completed"
    assert (first.summary["gap_histogram"], first.summary["staleness"]) == (gaps1, decisions1)
    assert any(int(g) > 0 for g in gaps1), "the test needs stale items"

    again = await harness.resume(run_id, {"max_proposals": 12})
    assert again.ctx.gap_histogram == Counter({int(k): v for k, v in gaps1.items()})
    second = await harness.run_to_end(again)
    gaps2, decisions2 = await _counts_of_rows(harness, run_id)
    assert second.status == "completed" and second.summary["proposal_attempts"] == 12
    assert sum(gaps2.values()) > sum(gaps1.values())
    assert (second.summary["gap_histogram"], second.summary["staleness"]) == (gaps2, decisions2)


async def test_a_run_stopped_mid_flight_resumes_with_every_decision_counted(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 7})
    hold_eval = fake.hold(lambda r: r.stage == "evaluate" and r.item_id not in (None, "i000001"))
    task = harness.start(run)
    await until(lambda: run.ctx.pool.version == 2 and {r.item_id for r in hold_eval.arrived} == {"i000002", "i000003"},
                what="item 1 committed, items 2 and 3 held at evaluate")
    run.stop()
    assert (await harness.finish(task)).status == "interrupted"
    fake.gates.clear()
    again = await harness.resume(run.ctx.run_id)
    result = await harness.run_to_end(again)
    assert result.status == "completed"
    rows = await harness.rows("staleness", run.ctx.run_id)
    # Items 2 and 3 were checked at evaluate in both sessions: both checks are rows, both counted.
    assert [r["item_id"] for r in rows if r["stage"] == "evaluate"].count("i000002") == 2
    gaps, decisions = await _counts_of_rows(harness, run.ctx.run_id)
    assert (result.summary["gap_histogram"], result.summary["staleness"]) == (gaps, decisions)


async def test_program_counters_are_saved_and_restored(harness) -> None:
    run = await harness.create(budget={"max_proposals": 2})
    run.ctx.program.patch_retries, run.ctx.program.tolerant_blocks = 3, 1
    run.ctx.program.filter_counts.update({"duplicate": 2})
    run.ctx.program.failures = ["i000001 (from a000000): evaluation failed: ZeroDivisionError"]
    run.ctx.program.tried.update({"a000000": [["-x\n+y", "duplicate: in the pool"]]})
    await harness.run_to_end(run)
    record = await harness.record(run.ctx.run_id)
    assert record.counters["program"] == {"patch_retries": 3, "tolerant_blocks": 1, "filters": {"duplicate": 2},
                                          "failures": ["i000001 (from a000000): evaluation failed: ZeroDivisionError"],
                                          "tried": {"a000000": [["-x\n+y", "duplicate: in the pool"]]}}
    again = await harness.resume(run.ctx.run_id)
    assert again.ctx.program == ProgramCounters(3, 1, Counter({"duplicate": 2}),
                                                ["i000001 (from a000000): evaluation failed: ZeroDivisionError"],
                                                {"a000000": [["-x\n+y", "duplicate: in the pool"]]})
    await again.close()


# -- the stored snapshot -------------------------------------------------------------------------------

PERSISTED = ("run_id", "mode", "policy", "backend", "simulated", "pool_version", "pool_size", "seed_score",
             "best_score", "best_id", "gap_histogram", "staleness", "proposals", "proposal_attempts", "accepted",
             "rejected", "failed", "discarded_stale", "wasted_tokens", "llm_calls", "prompt_tokens",
             "completion_tokens", "metric_calls", "merges_tried", "merges_accepted", "superseded",
             "patch_retries", "tolerant_blocks", "filters", "budget_limits", "max_gap")


async def attached_snapshot(db: Path, run_id: str) -> EngineSnapshot:
    attach = AttachBackend(db, run_id)
    await attach.start()
    try:
        assert not attach.can_control  # no control socket: the snapshot is built from the database
        frame = attach.frame()
        assert frame is not None
        return frame.snap
    finally:
        await attach.close()


def _persisted(snap: EngineSnapshot) -> dict:
    out = {k: getattr(snap, k) for k in PERSISTED}
    out = {k: dict(v) if hasattr(v, "items") else v for k, v in out.items()}
    out["budget_spent"] = {k: v for k, v in snap.budget_spent.items() if k != "wall_s"}
    return out


async def test_attachs_snapshot_of_the_database_equals_the_live_one(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3, "policy": "reflective", "max_gap": 0},
                               budget={"max_proposals": 6})
    await _run_with_stale_items(harness, run)
    live = run.snapshot()
    stored = await attached_snapshot(harness.db, run.ctx.run_id)
    assert _persisted(stored) == _persisted(live)
    assert live.gap_histogram and live.staleness["reflect"] > 0
    assert stored.elapsed_s > 0 and stored.stages == () and stored.llm[0].calls == live.llm_calls

    again = await harness.resume(run.ctx.run_id, {"max_proposals": 9})
    await harness.run_to_end(again)
    assert _persisted(await attached_snapshot(harness.db, run.ctx.run_id)) == _persisted(again.snapshot())


def test_the_control_socket_carries_every_snapshot_field_and_tolerates_version_skew() -> None:
    from tests.tui.fakes import frozen_snapshot

    snap = frozen_snapshot()
    wire = json.loads(json.dumps(snapshot_to_dict(snap)))
    assert snapshot_from_dict(wire) == snap
    older = {k: v for k, v in wire.items() if k not in ("patch_retries", "filters", "metric_calls")}
    assert snapshot_from_dict({**older, "from_a_newer_driver": 1}).patch_retries == 0
