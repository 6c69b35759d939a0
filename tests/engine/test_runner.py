"""EngineRun end to end on the scripted LLM: failed proposals, fatal errors, resume, events, summary.

See tests/engine/fakes.py for the task and the fake server; every run uses a temp SQLite file.
"""

from __future__ import annotations

import httpx
import pytest

from tests.engine.fakes import SEED_PROMPT, completion, harness, item_events, until  # noqa: F401


def is_item(stage: str, item_id: str | None = None):
    return lambda r: r.stage == stage and r.item_id is not None and (item_id is None or r.item_id == item_id)


def reply_for(scripts: dict):
    """override: scripts maps (stage, item_id) to a function of the request returning a response."""
    def override(req):
        fn = scripts.get((req.stage, req.item_id))
        return fn(req) if fn else None
    return override


def auth_error(_req=None) -> httpx.Response:
    return httpx.Response(401, json={"error": {"message": "invalid api key"}})


# -- 7. failed proposals ----------------------------------------------------------------------------


async def test_failed_proposals_never_become_artifacts_and_are_tallied(harness) -> None:
    fake = harness.fake
    fenced = lambda req, finish="stop": completion(f"```\n{req.current()}\nKEYWORD-alpha\n```", finish)  # noqa: E731
    fake.override = reply_for({
        ("propose", "i000001"): lambda req: completion("I would rather not change anything."),
        ("propose", "i000002"): lambda req: fenced(req, "length"),
        ("propose", "i000003"): lambda req: completion(f"Same as before:\n```\n{req.current()}\n```"),
        ("propose", "i000004"): lambda req: httpx.Response(413, json={"error": {"message": "prompt is too long"}}),
    })
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 5})
    events = run.bus.subscribe()
    result = await harness.run_to_end(run)
    assert result.status == "completed" and result.exit_code == 0

    s = result.summary
    assert s["proposal_attempts"] == 5
    assert s["failed"] == 4
    assert s["proposals"] == 1
    assert s["accepted"] + s["rejected"] == 1
    expected_reasons = {
        "no parsable instructions block": 1,
        "truncated (finish_reason=length)": 1,
        "no change from parent": 1,
        "LLM error": 1,
    }
    assert dict(run.ctx.tally.fail_reasons) == expected_reasons

    record = await harness.record(run.ctx.run_id)
    assert record.counters["tally"]["fail_reasons"] == expected_reasons
    assert record.counters["tally"]["failed"] == 4
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    for n in range(1, 5):
        assert items[f"i{n:06d}"]["outcome"] == "failed"
        assert fake.of("evaluate", f"i{n:06d}") == []
    assert items["i000001"]["error"] == "no parsable instructions block"
    assert items["i000002"]["error"] == "truncated (finish_reason=length)"
    assert items["i000003"]["error"] == "no change from parent"
    assert items["i000004"]["error"] == "LLM error: context_overflow"
    artifact_ids = {a["artifact_id"] for a in record.artifacts}
    assert artifact_ids <= {"a000000", "a000005"}
    assert not any(a.artifact_id in {"a000001", "a000002", "a000003", "a000004"} for a in run.ctx.pool.artifacts())
    assert all("child" not in i["payload"] for n, i in items.items() if n != "i000005")

    ends = {e.item_id: e for e in events.drain() if e.kind == "proposal_end"}
    assert [ends[f"i{n:06d}"].ok for n in range(1, 6)] == [False, False, False, False, True]
    assert ends["i000002"].reason == "truncated (finish_reason=length)"
    calls = await harness.rows("llm_calls", run.ctx.run_id)
    by_item = {c["item_id"]: c for c in calls if c["stage"] == "propose"}
    assert by_item["i000002"]["status"] == "length" and by_item["i000002"]["finish_reason"] == "length"
    assert by_item["i000004"]["status"] == "error"
    assert s["llm_calls"] == len(calls)


# -- 8. fatal errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["propose", "rollout"])
async def test_fatal_llm_error_mid_run_fails_the_run_and_leaves_items_for_resume(harness, stage) -> None:
    fake = harness.fake
    fake.override = lambda req: auth_error() if req.stage == stage and req.item_id == "i000002" else None
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 6})
    result = await harness.run_to_end(run)

    assert result.status == "failed" and result.exit_code == 3
    assert result.reason.startswith("fatal: ") and "refused the credentials" in result.reason
    assert run.orchestrator.fatal is not None
    record = await harness.record(run.ctx.run_id)
    assert record.status == "failed"
    assert record.summary["status"] == "failed" and record.summary["stop_reason"] == result.reason
    open_items = {i["item_id"]: i["stage"] for i in record.open_items}
    assert open_items.get("i000002") == stage
    # Only the first fatal error counts; nothing after it was admitted.
    assert run.orchestrator.admitted == 3

    # The cause is fixed: a resume redoes the open items and finishes the run.
    fake.override = None
    run2 = await harness.resume(run.ctx.run_id)
    assert {it.item_id: it.stage for it in run2.backlog} == open_items
    result2 = await harness.run_to_end(run2)
    assert result2.status == "completed" and result2.exit_code == 0
    record2 = await harness.record(run.ctx.run_id)
    assert record2.open_items == []
    assert record2.status == "completed"


async def test_fatal_error_while_scoring_the_seed(harness) -> None:
    harness.fake.override = lambda req: auth_error() if req.item_id is None else None
    run = await harness.create()
    result = await harness.run_to_end(run)
    assert result.status == "failed" and result.exit_code == 3
    record = await harness.record(run.ctx.run_id)
    assert record.status == "failed" and record.artifacts == [] and record.pool_version == 0
    assert harness.fake.items_seen() == []

    harness.fake.override = None
    run2 = await harness.resume(run.ctx.run_id, {"max_proposals": 2})
    result2 = await harness.run_to_end(run2)
    assert result2.status == "completed"
    assert result2.summary["seed_score"] == 0.0 and result2.summary["proposal_attempts"] == 2


async def test_a_broken_metric_fails_the_run_with_exit_code_2(harness) -> None:
    harness.fake.override = lambda req: completion("RAISE") if req.stage == "rollout" and req.item_id == "i000001" else None
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 3})
    result = await harness.run_to_end(run)
    assert result.status == "failed" and result.exit_code == 2
    assert "metric raised ValueError: metric exploded" in result.reason
    record = await harness.record(run.ctx.run_id)
    assert [(i["item_id"], i["stage"]) for i in record.open_items] == [("i000001", "rollout")]


# -- 9. resume ------------------------------------------------------------------------------------------


async def test_stop_then_resume_continues_pool_counters_and_interrupted_items(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 7})
    run_id = run.ctx.run_id
    hold_eval = fake.hold(lambda r: r.stage == "evaluate" and r.item_id not in (None, "i000001"))
    hold_prop = fake.hold(is_item("propose", "i000004"))
    task = harness.start(run)
    await until(lambda: run.ctx.pool.version == 2 and {r.item_id for r in hold_eval.arrived} == {"i000002", "i000003"}
                and hold_prop.arrived, what="item 1 committed, 2-3 held at evaluate, 4 at propose")
    run.stop()
    first = await harness.finish(task)
    assert first.status == "interrupted"
    before = await harness.record(run_id)
    stored_stages = {i["item_id"]: i["stage"] for i in before.open_items}
    assert stored_stages == {"i000002": "evaluate", "i000003": "evaluate", "i000004": "propose"}
    assert before.pool_version == 2
    n_first = len(fake.requests)

    fake.gates.clear()
    run2 = await harness.resume(run_id)
    ctx = run2.ctx
    assert run2.resumed
    assert {it.item_id: it.stage for it in run2.backlog} == stored_stages
    assert ctx.pool.version == 2 and ctx.seed_id == "a000000" and "a000001" in ctx.pool
    assert ctx.item_seq == 4
    assert ctx.tally.accepted == 1 and ctx.tally.llm_calls == first.summary["llm_calls"]
    assert ctx.budget.spent["proposals"] == before.counters["budget"]["proposals"]
    events = run2.bus.subscribe()
    second = await harness.run_to_end(run2)
    assert second.status == "completed" and second.reason == "budget exhausted: proposals"

    later = fake.requests[n_first:]
    assert all(r.item_id is not None for r in later), "the seed is not scored again"
    for item_id, stage in stored_stages.items():
        mine = [r.stage for r in later if r.item_id == item_id]
        assert mine and mine[0] == stage, (item_id, mine)
        assert "rollout" not in mine
    assert "propose" not in [r.stage for r in later if r.item_id in ("i000002", "i000003")]
    new_items = [i for i in fake.items_seen() if int(i[1:]) > 4]
    assert new_items and min(new_items) == "i000005"
    assert [e.resumed for e in events.drain() if e.kind == "run_started"] == [True]

    after = await harness.record(run_id)
    assert after.open_items == []
    assert after.status == "completed"
    versions = [e["version"] for e in after.pool_events]
    assert versions == list(range(1, after.pool_version + 1))
    assert after.pool_version == second.summary["pool_version"] == len(after.artifacts)
    assert {a["artifact_id"] for a in before.artifacts} <= {a["artifact_id"] for a in after.artifacts}
    s1, s2 = first.summary, second.summary
    assert s2["llm_calls"] == s1["llm_calls"] + len(later) == after.counts["llm_calls"]
    assert s2["accepted"] >= s1["accepted"] and s2["metric_calls"] > s1["metric_calls"]
    assert s2["budget_spent"]["llm_calls"] == s2["llm_calls"]
    assert s2["budget_spent"]["proposals"] == 7
    outcomes = {i["item_id"]: i["outcome"] for i in await harness.rows("items", run_id)}
    assert all(outcomes[i] for i in stored_stages)
    # Each interrupted item's stage rows continue where session 1 stopped.
    stage_rows = await harness.rows("item_stages", run_id)
    i2 = [r["stage"] for r in stage_rows if r["item_id"] == "i000002"]
    assert i2[:2] == ["rollout", "propose"] and i2[2] == "evaluate"


async def test_a_proposal_interrupted_by_stop_is_charged_once(harness) -> None:
    """Regression: propose charged the proposals budget before its LLM call, so a proposal cut
    short by stop() was paid for and then paid again when the resumed run redid it."""
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "sync"}, budget={"max_proposals": 3})
    hold = fake.hold(is_item("propose", "i000001"))
    task = harness.start(run)
    await until(lambda: hold.arrived, what="item 1's proposal held")
    run.stop()
    await harness.finish(task)
    fake.gates.clear()
    run2 = await harness.resume(run.ctx.run_id)
    result = await harness.run_to_end(run2)
    propose_calls = [c for c in await harness.rows("llm_calls", run.ctx.run_id)
                     if c["stage"] == "propose" and c["status"] != "cancelled"]
    # Three proposals were made (three propose LLM calls completed) and three may be made.
    assert result.summary["budget_spent"]["proposals"] == len(propose_calls) == 3


# -- 10. events ------------------------------------------------------------------------------------------


ACCEPTED = ["candidate_selected", "proposal_start", "proposal_end", "evaluation_start", "evaluation_end",
            "evaluation_start", "evaluation_end", "candidate_accepted"]
REJECTED = ["candidate_selected", "proposal_start", "proposal_end", "evaluation_start", "evaluation_end",
            "candidate_rejected"]


async def test_bus_publishes_the_gepa_events_of_every_item(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 8})
    sub = run.bus.subscribe()
    result = await harness.run_to_end(run)
    events = sub.drain()
    assert sub.dropped == 0
    assert events[0].kind == "run_started" and events[-1].kind == "run_finished"
    assert events[-1].status == result.status
    items = sorted({e.item_id for e in events if e.kind == "candidate_selected"})
    assert len(items) == 8
    accepted = rejected = 0
    for item_id in items:
        kinds = item_events(events, item_id)
        assert kinds in (ACCEPTED, REJECTED), (item_id, kinds)
        accepted += kinds == ACCEPTED
        rejected += kinds == REJECTED
        decisions = [e.stage for e in events if e.kind == "staleness_decision" and e.item_id == item_id]
        assert decisions == (["propose", "evaluate"])
    assert (accepted, rejected) == (result.summary["accepted"], result.summary["rejected"])
    pool_versions = [e.pool_version for e in events if e.kind == "candidate_accepted"]
    assert pool_versions == list(range(2, 2 + accepted))


async def test_a_slow_subscriber_drops_and_counts_without_affecting_the_engine(harness) -> None:
    cfg = dict(pipeline={"mode": "sync"}, budget={"max_proposals": 5})
    quiet = await harness.create(**cfg)
    baseline = await harness.run_to_end(quiet)

    run = await harness.create(**cfg)
    slow = run.bus.subscribe(maxlen=3)
    full = run.bus.subscribe()
    result = await harness.run_to_end(run)
    assert run.bus.published > 20
    assert slow.dropped == run.bus.published - 3
    assert full.dropped == 0 and len(full.drain()) == run.bus.published
    kept = slow.drain()
    assert len(kept) == 3 and kept[-1].kind == "run_finished"
    assert slow.closed
    keys = ("status", "proposal_attempts", "accepted", "rejected", "failed", "pool_version", "best_score", "llm_calls",
            "metric_calls", "prompt_tokens", "completion_tokens")
    assert {k: result.summary[k] for k in keys} == {k: baseline.summary[k] for k in keys}


# -- summary -------------------------------------------------------------------------------------------


async def test_summary_agrees_with_the_store(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 4}, budget={"max_proposals": 6})
    result = await harness.run_to_end(run)
    s = result.summary
    record = await harness.record(run.ctx.run_id)
    assert record.summary == s
    assert s["run_id"] == run.ctx.run_id and s["db"] == str(harness.db)
    assert s["task"] == "kw" and s["mode"] == "async" and s["policy"] == "full" and s["simulated"] is True
    assert s["llm_calls"] == record.counts["llm_calls"]
    assert s["prompt_tokens"] == record.counts["prompt_tokens"] and s["completion_tokens"] == record.counts["completion_tokens"]
    assert s["pool_version"] == record.pool_version == len(record.artifacts)
    assert record.counts["items"] == {k: v for k, v in {"accepted": s["accepted"], "rejected": s["rejected"]}.items() if v}
    best = max(record.artifacts, key=lambda a: (a["val_mean"], -a["created_version"]))
    assert s["best_id"] == best["artifact_id"] and s["best_score"] == pytest.approx(best["val_mean"])
    assert s["seed_score"] == 0.0
    seed = next(a for a in record.artifacts if a["artifact_id"] == "a000000")
    assert seed["text"] == SEED_PROMPT and seed["status"] == "seed"
    assert s["metric_calls"] == run.ctx.tally.metric_calls
    assert record.counts["evaluations"] == 4 * len(record.artifacts)
