"""Speculative rollout completion (engine/capabilities/speculative_rollout.py): release after a
fraction of the minibatch, late answers joined before the gate, cancelled when the item ends
first, re-run after a resume. Answers are released by the test (events), never by timing."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from engine.capabilities.speculative_rollout import KEY, SpeculativeRollout, needed
from engine.context import CallFailed
from engine.items import Rollout, RolloutRelease, WorkItem


class Host:
    """run_example answers example `ex` when the test sets its event, with scores[ex]."""

    def __init__(self, scores: dict[str, float], fail: set[str] = frozenset()) -> None:
        self.scores, self.fail = scores, fail
        self.gates = {ex: asyncio.Event() for ex in scores}
        self.started: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        parent = SimpleNamespace(text="PARENT")
        self.ctx = SimpleNamespace(task=SimpleNamespace(max_score=1.0), pool=SimpleNamespace(get=lambda _id: parent))

    async def run_example(self, text: str, ex: str, stage: str) -> dict:
        self.started.append((text, ex))
        try:
            await self.gates[ex].wait()
        except asyncio.CancelledError:
            self.cancelled.append(ex)
            raise
        if ex in self.fail:
            raise CallFailed(f"LLM error in rollout on example {ex}: timeout")
        return {"example_id": ex, "input": ex, "output": "o", "score": self.scores[ex], "feedback": ""}


def _item(ids=("e1", "e2", "e3")) -> WorkItem:
    return WorkItem("i000001", 1, "a000000", list(ids), "rollout", 0.0)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize("fraction, n, want", [(0.6, 3, 2), (0.75, 4, 3), (1.0, 3, 3), (0.01, 5, 1), (0.5, 4, 2)])
def test_needed_is_the_ceiling_of_the_fraction(fraction, n, want):
    assert needed(fraction, n) == want


async def test_released_after_the_fraction_and_joined_whole_in_minibatch_order():
    host = Host({"e1": 0.2, "e2": 1.0, "e3": 0.5})
    spec, item = SpeculativeRollout(host, 0.6), _item()
    run = asyncio.ensure_future(spec.run(item, "PARENT"))
    host.gates["e3"].set()
    await _settle()
    assert not run.done()  # one answer of the two it needs
    host.gates["e1"].set()
    traces = await run
    assert [t["example_id"] for t in traces] == ["e1", "e3"]  # what the proposer sees, in minibatch order
    assert item.rollout_release == RolloutRelease(["e1", "e3"], 3, 1)
    assert item.to_payload()[KEY] == {"seen": ["e1", "e3"], "of": 3, "late": 1}  # the stored record
    item.rollout = Rollout(traces, [t["score"] for t in traces], "a000000")
    join = asyncio.ensure_future(spec.join(item))
    await _settle()
    assert not join.done()  # the gate waits for the late answer
    host.gates["e2"].set()
    await join
    assert [t["example_id"] for t in item.rollout.traces] == ["e1", "e2", "e3"]
    assert item.rollout.parent_mb == [0.2, 1.0, 0.5] and item.rollout.parent_mb_of == "a000000"
    assert item.rollout_release.joined is True and len(host.started) == 3  # no request was made twice


async def test_a_perfect_prefix_waits_for_more():
    host = Host({"e1": 1.0, "e2": 1.0, "e3": 0.0})
    spec, item = SpeculativeRollout(host, 0.6), _item()
    run = asyncio.ensure_future(spec.run(item, "PARENT"))
    host.gates["e1"].set()
    host.gates["e2"].set()
    await _settle()
    assert not run.done()  # two perfect answers could still be a perfect minibatch (GEPA skips it)
    host.gates["e3"].set()
    assert len(await run) == 3 and item.rollout_release.late == 0


async def test_a_failure_before_release_cancels_the_rest():
    host = Host({"e1": 0.2, "e2": 0.3, "e3": 0.4}, fail={"e1"})
    spec, item = SpeculativeRollout(host, 0.6), _item()
    run = asyncio.ensure_future(spec.run(item, "PARENT"))
    host.gates["e1"].set()
    with pytest.raises(CallFailed):
        await run
    assert sorted(host.cancelled) == ["e2", "e3"]


async def test_a_late_failure_fails_the_join():
    host = Host({"e1": 0.2, "e2": 0.3, "e3": 0.4}, fail={"e3"})
    spec, item = SpeculativeRollout(host, 0.6), _item()
    run = asyncio.ensure_future(spec.run(item, "PARENT"))
    host.gates["e1"].set()
    host.gates["e2"].set()
    traces = await run
    item.rollout = Rollout(traces, [t["score"] for t in traces], "a000000")
    host.gates["e3"].set()
    with pytest.raises(CallFailed):
        await spec.join(item)


async def test_an_item_that_ends_first_keeps_what_finished_and_cancels_the_rest():
    host = Host({"e1": 0.2, "e2": 0.3, "e3": 0.4, "e4": 0.5})
    spec, item = SpeculativeRollout(host, 0.5), _item(("e1", "e2", "e3", "e4"))
    run = asyncio.ensure_future(spec.run(item, "PARENT"))
    host.gates["e1"].set()
    host.gates["e2"].set()
    traces = await run
    item.rollout = Rollout(traces, [t["score"] for t in traces], "a000000")
    host.gates["e4"].set()
    await _settle()
    spec.ended(item)  # the proposal failed, say: nothing will join
    await _settle()
    assert [t["example_id"] for t in item.rollout.traces] == ["e1", "e2", "e4"]
    assert host.cancelled == ["e3"]
    assert item.to_payload()[KEY] == {"seen": ["e1", "e2"], "of": 4, "late": 2, "late_finished": 1, "cancelled": 1}


async def test_after_a_resume_the_join_runs_the_missing_examples_on_the_parent():
    host = Host({"e1": 0.2, "e2": 0.3, "e3": 0.4})
    spec, item = SpeculativeRollout(host, 0.6), _item()
    first = {"example_id": "e1", "input": "e1", "output": "o", "score": 0.2, "feedback": ""}
    third = {**first, "example_id": "e3", "score": 0.4}
    item.rollout = Rollout([first, third], [0.2, 0.4], "a000000")  # as read back from the stored row
    item.rollout_release = RolloutRelease(["e1", "e3"], 3, 1)
    host.gates["e2"].set()
    await spec.join(item)
    assert host.started == [("PARENT", "e2")]
    assert [t["example_id"] for t in item.rollout.traces] == ["e1", "e2", "e3"]
