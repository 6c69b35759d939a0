"""Orchestrator: sync vs async admission, pause/resume, drain/stop, staleness, budgets, snapshots.

The engine runs for real (EngineRun over a temp SQLite store) against the scripted LLM of
tests/engine/fakes.py; requests are held with asyncio.Event gates, never with long sleeps.
"""

from __future__ import annotations

import pytest

from engine.run.snapshot import EngineSnapshot
from tests.engine.fakes import completion, harness, idle, until  # noqa: F401  (harness is a fixture)

PIPELINE = ("rollout", "propose", "evaluate", "update")


def is_item(stage: str, item_id: str | None = None):
    return lambda r: r.stage == stage and r.item_id is not None and (item_id is None or r.item_id == item_id)


def check_stage_barriers(timeline: list[tuple], item_id: str) -> None:
    """Within one item the stages come in pipeline order and each stage's requests all end
    before the next stage's first request starts (GEPA's per-stage barrier)."""
    marks = [(n, kind, stage) for n, (kind, stage, iid, *_) in enumerate(timeline) if kind in ("start", "end") and iid == item_id]
    starts = [(n, stage) for n, kind, stage in marks if kind == "start"]
    order = [PIPELINE.index(stage) for _, stage in starts]
    assert order == sorted(order), f"{item_id}: stages out of order {[s for _, s in starts]}"
    stages = [s for s in PIPELINE if any(st == s for _, st in starts)]
    for a, b in zip(stages, stages[1:]):
        last_end_a = max(n for n, kind, st in marks if kind == "end" and st == a)
        first_start_b = min(n for n, kind, st in marks if kind == "start" and st == b)
        assert last_end_a < first_start_b, f"{item_id}: {b} started before {a} finished"


def check_snapshot(snap: EngineSnapshot, run) -> None:
    names = [s.name for s in snap.stages]
    # The pipeline's stages in order; a detour stage (reflect) may follow them.
    assert names[: len(PIPELINE)] == list(PIPELINE) and set(names[len(PIPELINE):]) <= {"reflect"}
    for s in snap.stages:
        assert 0 <= s.busy <= s.workers, s
        assert 0 <= s.depth <= s.capacity, s
        assert s.blocked <= s.workers, s
    assert snap.in_flight_items == run.orchestrator.in_flight
    assert snap.pool_version == run.ctx.pool.version
    assert snap.pool_size == len(run.ctx.pool)


# -- 1. sync mode ----------------------------------------------------------------------------------


async def test_sync_mode_runs_one_item_at_a_time_to_the_proposal_budget(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "sync", "max_in_flight": 8}, budget={"max_proposals": 4})
    assert all(s.target_workers == 1 for s in run.orchestrator.stages.values())
    result = await harness.run_to_end(run)

    assert result.status == "completed" and result.exit_code == 0
    assert result.reason == "budget exhausted: proposals"
    item_reqs = [r for r in fake.requests if r.item_id is not None]
    assert item_reqs and max(r.orch_in_flight for r in item_reqs) == 1
    assert fake.max_items_active == 1

    items = fake.items_seen()
    assert items == [f"i{n:06d}" for n in range(1, 5)]
    tl = fake.timeline
    for it in items:
        check_stage_barriers(tl, it)
    ends = {"candidate_accepted", "candidate_rejected"}
    for prev, nxt in zip(items, items[1:]):
        prev_end = max(n for n, e in enumerate(tl) if e[0] == "event" and e[1] in ends and e[2] == prev)
        prev_last_request = max(n for n, e in enumerate(tl) if e[0] == "end" and e[2] == prev)
        first_next = min(n for n, e in enumerate(tl) if e[0] == "start" and e[2] == nxt)
        selected_next = min(n for n, e in enumerate(tl) if e == ("event", "candidate_selected", nxt))
        assert prev_last_request < prev_end < selected_next < first_next
        assert fake.of("rollout", nxt)[0].orch_in_flight == 1

    s = result.summary
    assert s["proposal_attempts"] == 4 == s["budget_spent"]["proposals"]
    assert s["accepted"] + s["rejected"] == 4
    record = await harness.record(run.ctx.run_id)
    assert record.status == "completed"
    assert record.open_items == []
    assert sum(record.counts["items"].values()) == 4


# -- 2. async mode overlaps ------------------------------------------------------------------------


async def test_async_mode_overlaps_items_up_to_max_in_flight(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 8})
    gate = fake.hold(is_item("rollout"))
    task = harness.start(run)

    await until(lambda: len({r.item_id for r in gate.arrived}) == 3, what="three items held in rollout")
    await idle()
    # Three items' requests are on the wire at once; a fourth item is not admitted.
    assert {r.item_id for r in gate.arrived} == {"i000001", "i000002", "i000003"}
    assert fake.max_items_active == 3
    assert run.orchestrator.in_flight == 3
    assert run.orchestrator.admitted == 3
    assert run.snapshot().in_flight_items == 3

    gate.release()
    result = await harness.finish(task)
    assert result.status == "completed"
    seen = [r.orch_in_flight for r in fake.requests if r.item_id is not None]
    assert max(seen) == 3
    for it in fake.items_seen():
        check_stage_barriers(fake.timeline, it)
    assert result.summary["proposal_attempts"] == 8


async def test_async_mode_stages_of_different_items_run_concurrently(harness) -> None:
    """Item 1 is in propose while item 2 is still in rollout (stage overlap, not just admission)."""
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2}, budget={"max_proposals": 2})
    hold_rollout_2 = fake.hold(is_item("rollout", "i000002"))
    hold_propose_1 = fake.hold(is_item("propose", "i000001"))
    task = harness.start(run)
    await until(lambda: hold_rollout_2.arrived and hold_propose_1.arrived, what="item 1 in propose, item 2 in rollout")
    snap = run.snapshot()
    busy = {s.name: s.busy for s in snap.stages}
    assert busy["rollout"] == 1 and busy["propose"] == 1
    check_snapshot(snap, run)
    fake.release_all()
    assert (await harness.finish(task)).status == "completed"


# -- 3. pause ---------------------------------------------------------------------------------------


async def test_pause_holds_finished_work_in_the_next_stage_and_starts_nothing(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 3})
    gate = fake.hold(is_item("rollout", "i000001"))
    events = run.bus.subscribe()
    task = harness.start(run)
    await until(lambda: len(gate.arrived) == 3, what="item 1's rollout requests held")

    run.pause()
    assert run.snapshot().state == "paused"
    n_requests = len(fake.requests)
    gate.release()
    propose = run.orchestrator.stages["propose"]
    await until(lambda: propose.held + propose.depth == 1, what="rollout output handed to propose")
    await idle()

    # The rollout result was forwarded (the item now sits at propose) but nothing processes it.
    assert propose.busy == 0 and propose.stats.taken == 0
    assert fake.of("propose") == []
    assert len(fake.requests) == n_requests  # no new rollout (or other) request while paused
    assert run.orchestrator.in_flight == 1 and run.orchestrator.admitted == 1
    snap = run.snapshot()
    check_snapshot(snap, run)
    assert all(s.busy == 0 for s in snap.stages)
    await run.ctx.store.flush()
    (row,) = await run.ctx.store.fetch_rows("items", run.ctx.run_id)
    assert row["item_id"] == "i000001" and row["stage"] == "propose" and row["outcome"] is None
    assert [e.state for e in events.drain() if e.kind == "state_changed"] == ["running", "paused"]

    run.resume_work()
    assert run.snapshot().state == "running"
    result = await harness.finish(task)
    assert result.status == "completed"
    assert result.summary["proposal_attempts"] == 3
    assert len(fake.of("propose", "i000001")) == 1


async def test_pause_in_async_mode_holds_every_item_and_admits_none(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2}, budget={"max_proposals": 4})
    gate = fake.hold(is_item("rollout"))
    task = harness.start(run)
    await until(lambda: len(gate.arrived) == 6, what="two items' rollouts held")
    run.pause()
    gate.release()
    propose = run.orchestrator.stages["propose"]
    await until(lambda: propose.held + propose.depth == 2, what="both rollout outputs handed to propose")
    await idle()
    assert fake.of("propose") == []
    assert len(fake.of("rollout")) == 6
    assert run.orchestrator.admitted == 2
    check_snapshot(run.snapshot(), run)

    run.resume_work()
    result = await harness.finish(task)
    assert result.status == "completed" and result.summary["proposal_attempts"] == 4


async def test_no_item_is_admitted_while_paused_even_when_an_item_ends(harness) -> None:
    """Regression: _admit checked `running` only before waiting for room, so an item ending
    during a pause let admission select a new item while paused."""
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 1}, budget={"max_proposals": 3})
    gate = fake.hold(is_item("propose", "i000001"))
    # Item 1's proposal fails (no fenced block): the item ends inside the held handler.
    fake.override = lambda r: completion("no instructions here") if r.stage == "propose" and r.item_id == "i000001" else None
    task = harness.start(run)
    await until(lambda: gate.arrived, what="item 1's proposal held")
    run.pause()
    gate.release()
    await until(lambda: run.ctx.tally.failed == 1, what="item 1 ended")
    await idle()
    assert run.orchestrator.state == "paused"
    try:
        # Pause means no stage takes new items; admission (select) is the first stage.
        assert run.orchestrator.admitted == 1
        assert run.orchestrator.in_flight == 0
    finally:
        run.resume_work()
        await harness.finish(task)


# -- 4. drain and stop ------------------------------------------------------------------------------


async def test_drain_finishes_in_flight_items_and_admits_no_more(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3})  # no budget at all
    gate = fake.hold(is_item("propose"))
    task = harness.start(run)
    await until(lambda: len(gate.arrived) == 3, what="three proposals held")

    run.drain()
    assert run.snapshot().state == "draining"
    gate.release()
    result = await harness.finish(task)

    assert result.status == "interrupted" and result.exit_code == 130
    assert result.reason == "drain requested"
    assert run.orchestrator.admitted == 3
    assert fake.items_seen() == ["i000001", "i000002", "i000003"]
    record = await harness.record(run.ctx.run_id)
    assert record.open_items == []
    assert record.status == "interrupted"
    assert sum(record.counts["items"].values()) == 3
    assert record.summary["proposal_attempts"] == 3


async def test_drain_while_paused_resumes_and_finishes_the_work(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2})
    gate = fake.hold(is_item("rollout"))
    task = harness.start(run)
    await until(lambda: len(gate.arrived) == 6)
    run.pause()
    gate.release()
    await idle()
    run.drain()
    result = await harness.finish(task)
    assert result.status == "interrupted"
    assert (await harness.record(run.ctx.run_id)).open_items == []
    assert len(fake.of("propose")) == 2


async def test_stop_cancels_in_flight_work_and_leaves_items_open(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3})
    gate = fake.hold(is_item("propose"))
    task = harness.start(run)
    await until(lambda: len(gate.arrived) == 3, what="three proposals held")

    run.stop()
    result = await harness.finish(task)
    assert result.status == "interrupted" and result.exit_code == 130
    assert result.reason == "stopped"
    record = await harness.record(run.ctx.run_id)
    assert record.status == "interrupted"
    assert sorted((i["item_id"], i["stage"]) for i in record.open_items) == [
        ("i000001", "propose"), ("i000002", "propose"), ("i000003", "propose")]
    # The seed and rollout calls completed; the three cancelled proposals are recorded as such.
    assert record.counts["llm_calls_by_status"] == {"ok": 4 + 9, "cancelled": 3}
    assert result.summary["proposals"] == 0
    snap = run.snapshot()
    assert all(s.busy == 0 and s.workers == 0 for s in snap.stages)


async def test_stop_starts_no_new_request_and_commits_nothing(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 4})
    at_stop: dict = {}

    def stop_at_request_30(req):
        # Items 1-4 are in their minibatch evaluation; nothing has been committed yet.
        if req.seq == 30:
            run.stop()
            at_stop.update(pool=run.ctx.pool.version, admitted=run.orchestrator.admitted)
        return None

    fake.override = stop_at_request_30
    result = await harness.run_to_end(run)
    assert result.status == "interrupted"
    assert at_stop == {"pool": 1, "admitted": 4}
    assert run.orchestrator.admitted == 4
    assert [(r.stage, r.item_id) for r in fake.requests if r.seq > 30] == []
    assert run.ctx.pool.version == 1


async def test_stop_during_seed_evaluation_admits_nothing(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 5})
    seed = fake.hold(lambda r: r.item_id is None)
    task = harness.start(run)
    await until(lambda: len(seed.arrived) == 4, what="seed evaluation held")
    run.stop()
    seed.release()
    result = await harness.finish(task)
    assert result.status == "interrupted"
    assert run.orchestrator.admitted == 0
    assert fake.items_seen() == []
    assert (await harness.record(run.ctx.run_id)).open_items == []


# -- 5. guarded staleness -----------------------------------------------------------------------------


async def test_guarded_max_gap_0_discards_stale_items_at_propose_and_evaluate(harness) -> None:
    fake = harness.fake
    run = await harness.create(
        pipeline={"mode": "async", "policy": "guarded", "max_gap": 0, "max_in_flight": 3},
        budget={"max_proposals": 4, "max_llm_calls": 400},
    )
    events = run.bus.subscribe()
    hold_eval_1 = fake.hold(is_item("evaluate", "i000001"))
    hold_propose_2 = fake.hold(is_item("propose", "i000002"))
    hold_rollout_3 = fake.hold(is_item("rollout", "i000003"))
    task = harness.start(run)
    await until(lambda: hold_eval_1.arrived and hold_propose_2.arrived and len(hold_rollout_3.arrived) == 3,
                what="items 1-3 held at evaluate / propose / rollout")
    assert run.ctx.pool.version == 1
    hold_eval_1.release()
    await until(lambda: run.ctx.pool.version == 2, what="item 1 committed")
    hold_propose_2.release()
    hold_rollout_3.release()
    result = await harness.finish(task)
    assert result.status == "completed"

    rows = await harness.rows("staleness", run.ctx.run_id)
    by_item = {(r["item_id"], r["stage"]): r for r in rows}
    assert by_item[("i000001", "propose")]["decision"] == "pass"
    assert by_item[("i000001", "evaluate")]["decision"] == "pass"
    # Item 2 passed propose fresh, then item 1 committed: stale at evaluate.
    assert by_item[("i000002", "propose")]["decision"] == "pass"
    r2 = by_item[("i000002", "evaluate")]
    assert (r2["decision"], r2["gap"], r2["item_version"], r2["pool_version"], r2["policy"]) == ("discard", 1, 1, 2, "guarded")
    # Item 3 was still rolling out when item 1 committed: stale at propose, never proposed.
    r3 = by_item[("i000003", "propose")]
    assert (r3["decision"], r3["gap"]) == ("discard", 1)
    assert ("i000003", "evaluate") not in by_item
    assert fake.of("propose", "i000003") == []
    for r in rows:
        assert (r["decision"] == "discard") == (r["gap"] > 0), r
        assert r["stage"] in ("propose", "evaluate")

    discarded = [e for e in events.drain() if e.kind == "stale_discarded"]
    wasted = {e.item_id: e.wasted_tokens for e in discarded}
    assert wasted["i000002"] == 4 * 15  # 3 rollout calls + 1 proposal, 15 tokens each
    assert wasted["i000003"] == 3 * 15
    s = result.summary
    assert s["discarded_stale"] == len(discarded) == sum(1 for r in rows if r["decision"] == "discard")
    assert s["wasted_tokens"] == sum(wasted.values())
    record = await harness.record(run.ctx.run_id)
    outcomes = {i["item_id"]: i["outcome"] for i in await harness.rows("items", run.ctx.run_id)}
    assert outcomes["i000002"] == outcomes["i000003"] == "discarded_stale"
    assert not {"a000002", "a000003"} & {a["artifact_id"] for a in record.artifacts}
    assert record.open_items == []


async def test_full_policy_never_discards_and_records_gaps(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "policy": "full", "max_in_flight": 3}, budget={"max_proposals": 6})
    hold = fake.hold(is_item("rollout", "i000003"))
    task = harness.start(run)
    await until(lambda: hold.arrived)
    await until(lambda: run.ctx.pool.version >= 2, what="a commit while item 3 rolls out")
    hold.release()
    result = await harness.finish(task)
    rows = await harness.rows("staleness", run.ctx.run_id)
    assert {r["decision"] for r in rows} == {"pass"}
    assert any(r["gap"] > 0 for r in rows if r["item_id"] == "i000003")
    assert result.summary["discarded_stale"] == 0


# -- 6. budgets -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("key", "limit"), [("llm_calls", 50), ("metric_calls", 45)])
async def test_call_budgets_are_never_exceeded_and_the_run_drains(harness, mode, key, limit) -> None:
    run = await harness.create(pipeline={"mode": mode, "max_in_flight": 8}, budget={f"max_{key}": limit})
    result = await harness.run_to_end(run)
    assert result.status == "completed" and result.exit_code == 0
    assert result.reason == f"budget exhausted: {key}"
    s = result.summary
    spent = s["budget_spent"][key]
    assert spent <= limit
    # Admission stops only when the next worst-case item (11 calls, 10 metric calls) no longer fits.
    per_item = {"llm_calls": 11, "metric_calls": 10}[key]
    assert spent > limit - per_item
    record = await harness.record(run.ctx.run_id)
    assert record.open_items == []
    assert s["llm_calls"] == record.counts["llm_calls"] == s["budget_spent"]["llm_calls"]
    assert s["metric_calls"] == s["budget_spent"]["metric_calls"]
    assert record.counters["budget"][key] == spent


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_max_proposals_is_exact(harness, mode) -> None:
    run = await harness.create(pipeline={"mode": mode, "max_in_flight": 8}, budget={"max_proposals": 5})
    result = await harness.run_to_end(run)
    s = result.summary
    assert result.status == "completed"
    assert s["budget_spent"]["proposals"] == 5 == s["proposal_attempts"]
    assert len(harness.fake.of("propose")) == 5
    assert run.orchestrator.admitted == 5
    assert s["accepted"] + s["rejected"] + s["failed"] == 5
    assert s["pool_version"] == 1 + s["accepted"]


async def test_budget_reservations_are_all_released_at_the_end(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 4}, budget={"max_proposals": 6})
    await harness.run_to_end(run)
    assert run.ctx.reservations == {}
    assert all(abs(v) < 1e-6 for v in run.ctx.budget.reserved.values()), run.ctx.budget.reserved


# -- 11. snapshots ----------------------------------------------------------------------------------------


async def test_snapshot_is_consistent_mid_run_and_matches_the_store(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 4, "workers": {"rollout": 2}},
                               budget={"max_proposals": 8})
    hold_rollout = fake.hold(lambda r: r.stage == "rollout" and r.item_id not in (None, "i000001"))
    task = harness.start(run)
    # Item 1 completes; items 2-5 wait: two in rollout workers (held), two queued behind them.
    await until(lambda: run.ctx.pool.version == 2 and len({r.item_id for r in hold_rollout.arrived}) == 2
                and run.orchestrator.stages["rollout"].depth == 2, what="rollout saturated")
    snap = run.snapshot()
    check_snapshot(snap, run)
    rollout = next(s for s in snap.stages if s.name == "rollout")
    assert (rollout.workers, rollout.busy, rollout.depth) == (2, 2, 2)
    assert snap.in_flight_items == 4
    assert snap.pool_version == 2 and snap.pool_size == 2
    assert snap.accepted == 1 and snap.state == "running"
    await run.ctx.store.flush()
    record = await run.ctx.store.load_run(run.ctx.run_id)
    assert record.pool_version == snap.pool_version
    assert max(e["version"] for e in record.pool_events) == snap.pool_version
    assert len(record.open_items) == snap.in_flight_items
    assert snap.llm_calls == record.counts["llm_calls"]

    hold_rollout.release()
    result = await harness.finish(task)
    end = run.snapshot()
    assert end.pool_version == result.summary["pool_version"] == (await harness.record(run.ctx.run_id)).pool_version
    assert all(s.busy == 0 and s.depth == 0 for s in end.stages)
    assert end.in_flight_items == 0
