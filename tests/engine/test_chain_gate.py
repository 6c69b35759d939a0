"""The chain's fused gate decided early (engine/capabilities/chain_gate.py): the same outcome as the
full gate, sooner, with the answers it no longer needs cancelled."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, strategies as st

from engine.capabilities import chain_gate
from engine.capabilities.chain_gate import Answers as GateAnswers

# Quarters add up exactly in binary floating point, so sums compare as the arithmetic says.
SCORE = st.integers(0, 4).map(lambda q: q / 4)


@given(child=st.lists(SCORE, min_size=6, max_size=6), head=st.lists(SCORE, min_size=3, max_size=3),
       parent_own=st.integers(0, 12).map(lambda q: q / 4), known_child=st.integers(0, 6),
       known_head=st.integers(0, 3), fill=st.lists(SCORE, min_size=9, max_size=9))
def test_an_early_verdict_is_the_full_gate_s_whatever_the_missing_answers_score(
        child, head, parent_own, known_child, known_head, fill):
    early = chain_gate.verdict(child[:known_child], 6 - known_child, head[:known_head], 3 - known_head,
                               parent_own, 0.0, 1.0)
    if early is None:
        return
    # Any scores for the missing answers (the extremes among them) give the same outcome.
    for tail_child, tail_head in ((fill[:6], fill[6:]), ([0.0] * 6, [1.0] * 3), ([1.0] * 6, [0.0] * 3)):
        full_child = child[:known_child] + tail_child[known_child:]
        full_head = head[:known_head] + tail_head[known_head:]
        assert early == (sum(full_child) > parent_own + sum(full_head))


def test_verdict_waits_when_the_missing_answers_could_still_turn_it():
    assert chain_gate.verdict([1.0, 1.0], 4, [0.0], 2, 1.0, 0.0, 1.0) is None
    assert chain_gate.verdict([1.0] * 5, 1, [0.0, 0.0], 1, 1.0, 0.0, 1.0) is True  # 5 > 1 + 0 + 1
    assert chain_gate.verdict([0.0] * 4, 2, [1.0] * 3, 0, 0.0, 0.0, 1.0) is False  # 0 + 2 <= 3
    assert chain_gate.verdict([0.5] * 6, 0, [0.5] * 3, 0, 1.5, 0.0, 1.0) is False  # a tie fails


class Answers:
    """A fake task model: each (prompt, example) answers with a set score when released."""

    def __init__(self, scores: dict[tuple[str, str], float]) -> None:
        self.scores = scores
        self.gates = {key: asyncio.Event() for key in scores}
        self.cancelled: list[tuple[str, str]] = []

    async def run_one(self, prompt: str, example: str, stage: str) -> dict:
        key = (prompt, example)
        try:
            await self.gates[key].wait()
        except asyncio.CancelledError:
            self.cancelled.append(key)
            raise
        if self.scores[key] < 0:
            raise RuntimeError(f"answer to {example} failed")
        return {"example_id": example, "score": self.scores[key]}

    def release(self, *keys: tuple[str, str]) -> None:
        for key in keys:
            self.gates[key].set()


OWN, NEXT = ["o1", "o2", "o3"], ["n1", "n2", "n3"]


def _answers(child_own, child_next, head_next) -> Answers:
    scores = {("child", e): s for e, s in zip(OWN, child_own)}
    scores |= {("child", e): s for e, s in zip(NEXT, child_next)}
    scores |= {("head", e): s for e, s in zip(NEXT, head_next)}
    return Answers(scores)


def per_example(answers: Answers):
    """A prompt task's sides: one part per example."""
    def start(text: str, ids: list[str], stage: str, capture: bool):
        async def one(ex: str) -> GateAnswers:
            return GateAnswers([await answers.run_one(text, ex, stage)])
        return [(asyncio.ensure_future(one(ex)), 1) for ex in ids]
    return start


def per_batch(answers: Answers, log: list | None = None):
    """An adapter's sides: one part per side (its evaluate scores a batch at once)."""
    def start(text: str, ids: list[str], stage: str, capture: bool):
        async def side() -> GateAnswers:
            traces = list(await asyncio.gather(*(answers.run_one(text, ex, stage) for ex in ids)))
            return GateAnswers(traces, [("batch", text, tuple(ids))] if capture else [])
        if log is not None:
            log.append((text, tuple(ids), capture))
        return [(asyncio.ensure_future(side()), len(ids))]
    return start


def _gate(answers: Answers, parent_own: float, early: bool, start=None, score_range=(0.0, 1.0)) -> asyncio.Future:
    return asyncio.ensure_future(chain_gate.decide(start or per_example(answers), "child", OWN, NEXT, "head",
                                                   parent_own, score_range, early))


async def _settle() -> None:
    """Let every ready task run (no clock involved: the fake answers wait on events only)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def _decided_only_by_the_last(answers: Answers, gate: asyncio.Future, first: list, last: tuple):
    """Release `first`, check that the gate still waits, release `last`: the gate's result."""
    answers.release(*first)
    await _settle()
    assert not gate.done()
    answers.release(last)
    await _settle()
    return gate.result()


async def test_a_certain_failure_hands_on_with_the_head_s_traces_and_cancels_the_rest():
    answers = _answers([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    gate = _gate(answers, 1.0, True)
    # The head's three and two of the candidate's: at most 0 + 4 <= 1 + 3, whatever the rest score.
    answers.release(("head", "n1"), ("head", "n2"), ("head", "n3"), ("child", "o1"), ("child", "o2"))
    await _settle()
    assert gate.done()
    result = gate.result()
    assert result.passed is False and result.cancelled == 4
    assert [t["example_id"] for t in result.head_next.traces] == NEXT
    assert sorted(answers.cancelled) == [("child", "n1"), ("child", "n2"), ("child", "n3"), ("child", "o3")]


async def test_a_certain_pass_waits_for_the_candidate_s_next_traces_only():
    answers = _answers([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    gate = _gate(answers, 0.0, True)
    # Certain after the first five (5 > 0 + 3), but the next step needs the candidate's third next answer.
    first = [("child", "o1"), ("child", "o2"), ("child", "o3"), ("child", "n1"), ("child", "n2")]
    result = await _decided_only_by_the_last(answers, gate, first, ("child", "n3"))
    assert result.passed is True and result.cancelled == 3 and len(result.child_next.traces) == 3
    assert sorted(answers.cancelled) == [("head", "n1"), ("head", "n2"), ("head", "n3")]


async def test_without_early_the_gate_waits_for_every_answer():
    answers = _answers([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    gate = _gate(answers, 1.0, False)
    first = [k for k in answers.scores if k != ("child", "o3")]
    result = await _decided_only_by_the_last(answers, gate, first, ("child", "o3"))
    assert result.passed is False and result.cancelled == 0 and len(result.child_own) == 3
    assert answers.cancelled == []


async def test_a_failed_answer_cancels_the_others_and_is_raised():
    answers = _answers([0.0, -1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    gate = _gate(answers, 1.0, True)
    answers.release(("child", "o2"))
    with pytest.raises(RuntimeError, match="o2 failed"):
        await gate
    assert len(answers.cancelled) == 8


async def test_batch_sides_decide_once_a_whole_side_is_in_and_hand_on_the_adapter_s_batch():
    """An adapter's sides are whole batches: nothing is known of a side until all of it is in; the
    passing candidate's next-minibatch batch (captured) is what the next step reflects on."""
    answers = _answers([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    log: list = []
    gate = _gate(answers, 0.0, True, start=per_batch(answers, log))
    await _settle()
    assert [(text, capture) for text, _, capture in log] == [("child", False), ("child", True), ("head", True)]
    answers.release(*[("child", e) for e in OWN], ("child", "n1"), ("child", "n2"))
    await _settle()
    assert not gate.done()  # 3 known, the next side still out: 3 + 3 at most vs 0 + 3 at least is open
    answers.release(("child", "n3"))
    await _settle()
    result = gate.result()
    assert result.passed is True and result.cancelled == 3
    assert result.child_next.native == [("batch", "child", tuple(NEXT))]


async def test_an_unbounded_score_range_waits_for_every_answer():
    """A task whose scores have no known range (an adapter without one) decides only on the full gate."""
    answers = _answers([5.0, 5.0, 5.0], [5.0, 5.0, 5.0], [0.0, 0.0, 0.0])
    gate = _gate(answers, 0.0, True, score_range=(float("-inf"), float("inf")))
    first = [k for k in answers.scores if k != ("head", "n3")]
    result = await _decided_only_by_the_last(answers, gate, first, ("head", "n3"))
    assert result.passed is True and result.cancelled == 0


def test_verdict_with_infinite_bounds_and_nothing_missing_is_the_full_gate():
    inf = float("inf")
    assert chain_gate.verdict([1.0, 1.0], 0, [0.5], 0, 1.0, -inf, inf) is True
    assert chain_gate.verdict([1.0], 0, [0.5], 0, 0.5, -inf, inf) is False
