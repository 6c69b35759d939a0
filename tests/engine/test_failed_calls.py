"""A failed LLM call fails its item (recorded, never scored as an empty answer); attempts that
never produce a candidate stop the run instead of spending forever."""

from __future__ import annotations

import httpx

from tests.engine.fakes import harness  # noqa: F401


def _server_error(req):
    return httpx.Response(500, json={"error": {"message": "boom"}})


async def test_a_failed_rollout_call_fails_the_item_not_the_score(harness) -> None:
    fake = harness.fake
    fake.override = lambda req: _server_error(req) if (req.stage, req.item_id) == ("rollout", "i000001") else None
    run = await harness.create(budget={"max_proposals": 3})
    result = await harness.run_to_end(run)
    assert result.status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000001"]["outcome"] == "failed"
    assert "LLM error in rollout" in items["i000001"]["error"]
    assert "traces" not in items["i000001"]["payload"]  # nothing was scored from a missing answer
    assert not any(r.stage == "propose" and r.item_id == "i000001" for r in fake.requests)
    assert run.ctx.tally.fail_reasons["LLM error in rollout"] == 1


async def test_a_failed_validation_call_rejects_nothing_and_commits_nothing(harness) -> None:
    fake = harness.fake
    seen: dict[str, int] = {}

    def fail_late_evaluate(req):
        if req.stage == "evaluate" and req.item_id == "i000001":
            seen["n"] = seen.get("n", 0) + 1
            if seen["n"] > 3:  # past the minibatch gate: during full validation
                return _server_error(req)
        return None

    fake.override = fail_late_evaluate
    run = await harness.create(budget={"max_proposals": 2})
    result = await harness.run_to_end(run)
    assert result.status == "completed"
    items = {i["item_id"]: i for i in await harness.rows("items", run.ctx.run_id)}
    assert items["i000001"]["outcome"] == "failed" and "LLM error in evaluate" in items["i000001"]["error"]
    assert "a000001" not in run.ctx.pool  # never committed with a partial or zeroed score


async def test_attempts_that_never_yield_a_candidate_stop_the_run(harness) -> None:
    harness.fake.override = lambda req: _server_error(req) if req.stage == "propose" else None
    run = await harness.create(budget={"max_proposals": 500, "max_stalled": 5})
    result = await harness.run_to_end(run)
    assert result.status == "failed" and result.exit_code == 4
    assert "no progress: 5 items in a row" in result.reason
    assert result.summary["proposal_attempts"] < 20


async def test_a_handler_bug_hitting_every_item_stops_the_run(harness) -> None:
    """A crash is not charged as a proposal, so only this counter stops a bug that hits every item."""
    run = await harness.create(pipeline={"mode": "async"}, budget={"max_proposals": 500})

    async def broken(item):
        raise KeyError("a stage bug")

    run.orchestrator.stages["propose"].handler = broken
    result = await harness.run_to_end(run)
    assert result.status == "failed"
    assert "20 items in a row ended with an internal error" in result.reason
    assert "propose: KeyError: 'a stage bug'" in result.reason and "this is a bug" in result.reason
    assert run.ctx.tally.fail_reasons["internal error in propose"] < 40  # stopped, not without end
