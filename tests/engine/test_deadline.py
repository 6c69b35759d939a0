"""--max-wall as a deadline (engine/pipeline/deadline.py) on a hand-driven clock: at the limit the
run drains, work still running when the grace ends is cancelled and left open, the run ends
completed with the deadline in its summary, and a resume with a larger limit redoes that work
exactly once. No test waits on real time: the clock moves only when a test moves it.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from engine.config import BudgetConfig, ConfigError, build_config
from engine.pipeline.deadline import STEP_S, DeadlineClock, WallDeadline
from tests.engine.fakes import harness, idle, until  # noqa: F401

MINIBATCH = 3  # Harness.layer's minibatch_size


class HandClock:
    """Elapsed seconds that move only by advance(); sleepers wake when their time has come."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []
        self._moved = asyncio.Event()

    def elapsed(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake = self.t + seconds
        while self.t < wake:
            self._moved.clear()
            await self._moved.wait()

    def advance(self, seconds: float) -> None:
        self.t += seconds
        self._moved.set()

    def clock(self) -> DeadlineClock:
        return DeadlineClock(self.elapsed, self.sleep)


# -- the grace and its config ---------------------------------------------------------------------


def test_default_grace_is_a_tenth_of_the_limit_capped_at_a_minute() -> None:
    assert BudgetConfig(max_wall_s=30).wall_grace_s() == 3.0
    assert BudgetConfig(max_wall_s=3).wall_grace_s() == 0.3
    assert BudgetConfig(max_wall_s=3600).wall_grace_s() == 60.0
    assert BudgetConfig(max_wall_s=3600, max_wall_grace_s=0).wall_grace_s() == 0.0
    assert BudgetConfig(max_wall_s=10, max_wall_grace_s=25).wall_grace_s() == 25.0
    assert BudgetConfig().wall_grace_s() == 0.0


def test_a_grace_without_a_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"max_wall_grace_s \(--max-wall-grace\) is the grace after max_wall_s"):
        build_config([("test", {"budget": {"max_wall_grace_s": 5}})])
    with pytest.raises(ConfigError, match="greater than or equal to 0"):
        build_config([("test", {"budget": {"max_wall_s": 5, "max_wall_grace_s": -1}})])


# -- WallDeadline ---------------------------------------------------------------------------------


async def test_limit_then_grace_counted_after_earlier_sessions() -> None:
    hand = HandClock()
    # An earlier session used 4 of the 10 s: the limit comes 6 s into this one, the grace 2 s later.
    deadline = WallDeadline(10.0, 2.0, 4.0, hand.clock())
    calls: list[tuple[str, float]] = []
    task = asyncio.create_task(deadline.run(lambda: calls.append(("limit", hand.t)),
                                            lambda: calls.append(("grace", hand.t))))
    for _ in range(5):
        hand.advance(1.0)
        await idle(0)
    await idle(0.01)
    assert calls == [] and deadline.left_s() == 1.0 and not deadline.report.hit
    hand.advance(1.0)
    await until(lambda: calls, what="the limit")
    assert calls == [("limit", 6.0)] and deadline.report.hit
    hand.advance(1.5)
    await idle(0.01)
    assert len(calls) == 1, "the grace is not over yet"
    hand.advance(0.5)
    await until(lambda: len(calls) == 2, what="the end of the grace")
    assert calls[1] == ("grace", 8.0)
    await task
    assert max(hand.sleeps) <= STEP_S, "the deadline looks at the clock at least once a second"


async def test_a_session_starting_past_its_limit_drains_at_once() -> None:
    hand = HandClock()
    deadline = WallDeadline(10.0, 3.0, 12.0, hand.clock())
    calls: list[str] = []
    task = asyncio.create_task(deadline.run(lambda: calls.append("limit"), lambda: calls.append("grace")))
    await until(lambda: calls == ["limit"], what="the limit")
    hand.advance(0.9)
    await idle(0.01)
    assert calls == ["limit"], "a resumed run past its limit still gives in-flight work the grace"
    hand.advance(0.2)
    await until(lambda: calls == ["limit", "grace"], what="the end of the grace")
    await task


async def test_within_returns_work_that_ends_in_time_and_cancels_work_that_does_not() -> None:
    hand = HandClock()
    deadline = WallDeadline(5.0, 1.0, 0.0, hand.clock())
    assert await deadline.within(asyncio.sleep(0, "done"), {"item_id": "seed", "stage": "evaluate"}) == (True, "done")

    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    waiting = asyncio.create_task(deadline.within(forever(), {"item_id": "seed", "stage": "evaluate"}))
    hand.advance(5.0)
    await idle(0.01)
    assert not waiting.done(), "work past the limit keeps its grace"
    hand.advance(1.0)
    assert await asyncio.wait_for(waiting, 5) == (False, None)
    assert cancelled.is_set()
    assert deadline.report.figures() == {"limit_s": 5.0, "grace_s": 1.0, "hit": True,
                                         "cancelled": [{"item_id": "seed", "stage": "evaluate"}]}


async def test_within_lets_the_works_own_error_through() -> None:
    deadline = WallDeadline(5.0, 1.0, 0.0, HandClock().clock())

    async def broken() -> None:
        raise ValueError("metric exploded")

    with pytest.raises(ValueError, match="metric exploded"):
        await deadline.within(broken(), {"item_id": "seed", "stage": "evaluate"})
    assert deadline.report.cancelled == [] and not deadline.report.hit


# -- the run --------------------------------------------------------------------------------------


def rollout_of(item_id: str | None = None, but: str | None = None):
    return lambda r: (r.stage == "rollout" and r.item_id is not None and (item_id is None or r.item_id == item_id)
                      and r.item_id != but)


async def ok_rollouts(harness, run_id: str, item_id: str) -> int:
    return sum(1 for row in await harness.rows("llm_calls", run_id)
               if row["item_id"] == item_id and row["stage"] == "rollout" and row["status"] == "ok")


async def test_async_deadline_drains_lets_work_finish_in_the_grace_then_cancels_the_rest(harness) -> None:
    fake = harness.fake
    first = fake.hold(rollout_of("i000001"))
    rest = fake.hold(rollout_of(but="i000001"))
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3},
                               budget={"max_wall_s": 100, "max_wall_grace_s": 10, "max_proposals": 6})
    hand = HandClock()
    run.orchestrator.clock = hand.clock()
    task = harness.start(run)
    orch = run.orchestrator
    await until(lambda: orch.in_flight == 3 and len(first.arrived) == MINIBATCH
                and len(rest.arrived) == 2 * MINIBATCH, what="three items held in rollout")

    hand.advance(100.0)
    await until(lambda: orch.state == "draining", what="the drain at the limit")
    assert run.ctx.budget.exhausted == "wall_s"
    first.release()  # one item finishes inside the grace; nothing new is admitted meanwhile
    await until(lambda: orch.in_flight == 2, what="i000001 to end in the grace")
    await idle()
    assert orch.admitted == 3 and not task.done()

    hand.advance(10.0)
    result = await harness.finish(task)
    assert (result.status, result.exit_code) == ("completed", 0)
    assert result.reason == "budget exhausted: wall_s"
    assert result.summary["deadline"] == {
        "limit_s": 100.0, "grace_s": 10.0, "hit": True,
        "cancelled": [{"item_id": "i000002", "stage": "rollout"}, {"item_id": "i000003", "stage": "rollout"}]}
    assert any("deadline (100 s) cancelled 2 unfinished work item(s)" in w and "i000002 (rollout)" in w
               for w in run.warnings)
    record = await harness.record(run.ctx.run_id)
    assert [row["item_id"] for row in record.open_items] == ["i000002", "i000003"]
    assert record.status == "completed"
    assert record.summary["deadline"] == result.summary["deadline"], "the stored summary says it too"
    assert result.summary["proposal_attempts"] == 1, "only i000001 reached its proposal"

    # A larger limit: the resume redoes the two cancelled items exactly once and finishes the run.
    fake.release_all()
    run2 = await harness.resume(run.ctx.run_id, {"max_wall_s": 10_000})
    assert [it.item_id for it in run2.backlog] == ["i000002", "i000003"]
    result2 = await harness.run_to_end(run2)
    assert (result2.status, result2.reason) == ("completed", "budget exhausted: proposals")
    assert result2.summary["proposal_attempts"] == 6
    assert result2.summary["deadline"] == {"limit_s": 10_000.0, "grace_s": 10.0, "hit": False, "cancelled": []}
    record2 = await harness.record(run.ctx.run_id)
    assert record2.open_items == []
    for item_id in ("i000001", "i000002", "i000003"):
        assert await ok_rollouts(harness, run.ctx.run_id, item_id) == MINIBATCH, item_id
    await assert_each_ended_once(harness, run.ctx.run_id, ["i000002", "i000003"])
    items = {row["item_id"]: row for row in await harness.rows("items", run.ctx.run_id)}
    charged = [i for i, row in items.items() if (row["payload"] or {}).get("proposal")]
    assert len(charged) == 6 and {"i000002", "i000003"} <= set(charged)


@pytest.mark.parametrize("mode", ["sync", "pxn", "chain"])
async def test_every_mode_ends_at_limit_plus_grace_and_resumes(harness, mode) -> None:
    fake = harness.fake
    held = fake.hold(rollout_of())
    pipeline = {"mode": mode, "pxn_parents": 1, "pxn_mutations": 2, "chains": 2}
    run = await harness.create(pipeline=pipeline, budget={"max_wall_s": 50, "max_proposals": 4})
    hand = HandClock()
    run.orchestrator.clock = hand.clock()
    task = harness.start(run)
    orch = run.orchestrator
    await until(lambda: held.arrived and orch.in_flight >= 1, what="an item held in rollout")
    hand.advance(50.0)
    await until(lambda: orch.state == "draining", what="the drain at the limit")
    hand.advance(4.9)
    await idle()
    assert not task.done(), "the default grace is 5 s (a tenth of 50 s)"
    hand.advance(0.2)
    result = await harness.finish(task)
    assert (result.status, result.exit_code) == ("completed", 0)
    cancelled = [c["item_id"] for c in result.summary["deadline"]["cancelled"]]
    assert cancelled and all(c["stage"] == "rollout" for c in result.summary["deadline"]["cancelled"])
    record = await harness.record(run.ctx.run_id)
    assert [row["item_id"] for row in record.open_items] == cancelled
    for item_id in cancelled:
        assert await ok_rollouts(harness, run.ctx.run_id, item_id) == 0, "held: no call of theirs was answered"

    fake.release_all()
    run2 = await harness.resume(run.ctx.run_id, {"max_wall_s": 10_000})
    result2 = await harness.run_to_end(run2)
    assert result2.status == "completed" and result2.summary["proposal_attempts"] == 4
    assert (await harness.record(run.ctx.run_id)).open_items == []
    await assert_each_ended_once(harness, run.ctx.run_id, cancelled)


async def assert_each_ended_once(harness, run_id: str, item_ids: list[str]) -> None:
    """Redone exactly once: each item finished every stage at most once, ended, and the proposals
    charged are one per charged item (no item charged twice)."""
    finished = Counter((row["item_id"], row["stage"]) for row in await harness.rows("item_stages", run_id)
                       if row["outcome"] is not None)
    items = {row["item_id"]: row for row in await harness.rows("items", run_id)}
    for item_id in item_ids:
        assert items[item_id]["outcome"] is not None, item_id
        assert finished[(item_id, "rollout")] == 1, item_id
        assert all(n == 1 for (i, _), n in finished.items() if i == item_id), finished


async def test_a_seed_evaluation_past_the_grace_is_cut_and_a_resume_scores_it(harness) -> None:
    fake = harness.fake
    seed = fake.hold(lambda r: r.item_id is None)
    run = await harness.create(budget={"max_wall_s": 20, "max_wall_grace_s": 1, "max_proposals": 2})
    hand = HandClock()
    run.orchestrator.clock = hand.clock()
    task = harness.start(run)
    await until(lambda: seed.arrived, what="the seed's evaluation")
    hand.advance(21.0)
    result = await harness.finish(task)
    assert (result.status, result.exit_code) == ("completed", 0)
    assert result.summary["deadline"]["cancelled"] == [{"item_id": "seed", "stage": "evaluate"}]
    assert result.summary["seed_score"] is None and fake.items_seen() == []
    assert (await harness.record(run.ctx.run_id)).artifacts == []

    fake.release_all()
    run2 = await harness.resume(run.ctx.run_id, {"max_wall_s": 10_000})
    result2 = await harness.run_to_end(run2)
    assert result2.status == "completed" and result2.summary["seed_score"] is not None
    assert result2.summary["proposal_attempts"] == 2


async def test_a_run_that_drains_before_its_grace_ends_cancels_nothing(harness) -> None:
    held = harness.fake.hold(rollout_of())
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2}, budget={"max_wall_s": 30})
    hand = HandClock()
    run.orchestrator.clock = hand.clock()
    task = harness.start(run)
    await until(lambda: len(held.arrived) == 2 * MINIBATCH, what="two items held in rollout")
    hand.advance(30.0)
    await until(lambda: run.orchestrator.state == "draining", what="the drain at the limit")
    held.release()
    result = await harness.finish(task)
    assert (result.status, result.reason) == ("completed", "budget exhausted: wall_s")
    assert result.summary["deadline"] == {"limit_s": 30.0, "grace_s": 3.0, "hit": True, "cancelled": []}
    assert run.warnings == []
    assert (await harness.record(run.ctx.run_id)).open_items == []
