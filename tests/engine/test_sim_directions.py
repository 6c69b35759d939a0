"""The simulated proposer follows directions its request states (engine/llm/sim/directions.py,
program_model.P_FOLLOW), whoever wrote them, and only then: a request without one, or with one
naming nothing in the program, gets exactly the reply it got before. The agents that write
directions read them from diffs and summaries."""

from __future__ import annotations

import random
import re

import pytest

from engine.items import WorkItem
from engine.llm.sim import directions, program_model
from engine.llm.sim.answer import answer
from engine.stages import program_prompt
from engine.stages.strategy_stages import with_guidance
from engine.strategy.context_agents import navigator_messages, summarizer_messages
from engine.strategy.evolve_buffer import Transition
from engine.strategy.revise import Change, reviser_messages

PROGRAM = """import math

# EVOLVE-BLOCK-START
def solve(n):
    step = 0.25
    scale = 3
    total = 0
    for i in range(n):
        total += step * math.sqrt(i + scale)
    return total
# EVOLVE-BLOCK-END
"""


def _request(guidance: str | None) -> list[dict]:
    messages = program_prompt.build_messages(
        system=program_prompt.system_message("", "diff"), description="Maximise solve(10).", parent_id="a000003",
        parent_code=PROGRAM, parent_score=0.5, metrics={}, feedback={}, last_change="", others=[], failures=[],
        fmt="diff", max_chars=40000)
    if guidance is None:
        return messages
    item = WorkItem(item_id="i1", created_version=1, parent_id="a000003", minibatch=[], stage="propose",
                    created_at=0.0, notes={"guidance": guidance})
    return with_guidance(messages, item, frozenset({"guidance"}))


def _step_after(reply: str) -> float | None:
    """The value `step` has after the reply's SEARCH/REPLACE blocks (None: not moved, or no blocks)."""
    m = re.search(r"=======\n\s*step = ([\d.]+)", reply)
    return float(m.group(1)) if m else None


@pytest.mark.parametrize("text, expected", [
    ("1. Raise step (now 0.25) by about 10%.", [("step", True)]),
    ("Directions that helped: lower scale; increase the constant 0.25.", [("scale", False), ("0.25", True)]),
    ("Do not lower step. Avoid lowering scale: it hurt.", []),
    ("Never raise step; reduce `scale` instead.", [("scale", False)]),
    ("Raise the score by tuning. Lower your expectations.", []),  # names nothing in the program
    ("```python\nraise step\n```", []),  # code is not prose
])
def test_directives_are_imperative_unnegated_and_name_a_target(text, expected) -> None:
    assert directions.directives(text, {"step", "scale", "0.25"}) == expected


def test_a_request_without_a_usable_direction_gets_exactly_the_old_reply() -> None:
    for seed in range(40):
        plain = answer(_request(None), "propose", random.Random(seed))
        assert answer(_request("Lower your expectations; raise the score."), "propose", random.Random(seed)) == plain
        assert answer(_request("Avoid lowering step."), "propose", random.Random(seed)) == plain


def test_the_proposer_follows_a_stated_direction_about_as_often_as_p_follow() -> None:
    seeds = range(300)
    raised = lowered = 0
    for seed in seeds:
        value = _step_after(answer(_request("Directions that helped: raise step."), "propose", random.Random(seed)))
        raised += value is not None and value > 0.25
        lowered += value is not None and value < 0.25
    base = [_step_after(answer(_request(None), "propose", random.Random(seed))) for seed in seeds]
    base_raised = sum(1 for v in base if v is not None and v > 0.25)
    well_formed = 1 - (program_model.P_MALFORMED + program_model.P_NOT_FOUND + program_model.P_OUTSIDE
                       + program_model.P_SYNTAX)
    # Followed in P_FOLLOW of the well-formed replies, plus what the undirected model does anyway.
    assert raised / len(seeds) > program_model.P_FOLLOW * well_formed * 0.85 + 0.5 * base_raised / len(seeds)
    assert lowered < base_raised  # the contrary move only comes from the undirected share


def test_moves_are_read_from_diffs_and_the_context_summarizer_reports_them() -> None:
    diff = "-    step = 0.25\n+    step = 0.28\n-    scale = 3\n+    scale = 2\n-    x = 1\n+    y = 2\n"
    assert [m.describe() for m in directions.moves(diff)] == ["raises step (0.25 -> 0.28)", "lowers scale (3 -> 2)"]
    reply = answer(summarizer_messages("", 0.5, 0.6, diff), "summarize", random.Random(0))
    assert reply.startswith("NEW: raises step (0.25 -> 0.28), lowers scale (3 -> 2).")


def _t(n: int, category: str, delta: float, after: str) -> Transition:
    return Transition("a000001", f"a{n:06d}", 0.5, 0.5 + delta, category, "", after, n)  # type: ignore[arg-type]


def test_the_navigator_turns_reported_moves_into_directions() -> None:
    sample = [_t(2, "improvement", 0.1, "NEW: raises step (0.25 -> 0.28)."),
              _t(3, "improvement", 0.05, "NEW: raises step (0.28 -> 0.3)."),
              _t(4, "decline", -0.1, "NEW: lowers scale (3 -> 2)."),
              _t(5, "decline", -0.02, "NEW: raises step (0.3 -> 0.5).")]
    reply = answer(navigator_messages("Maximise.", "", sample), "navigate", random.Random(0))
    assert "Directions that helped: raise step." in reply and "Avoid lowering scale" in reply
    assert directions.directives(reply, {"step", "scale"}) == [("step", True)]


def test_the_reviser_turns_a_refuted_direction_and_keeps_a_confirmed_one() -> None:
    def revise(change: str) -> str:
        msgs = reviser_messages("plan", "1. Raise step (now 0.25) by about 10%.", 2, 5,
                                [Change("a4", change)], "Maximise.")
        return answer(msgs, "plan_revise", random.Random(0))

    assert revise("a4 from a1: score 0.4 (parent 0.5, delta -0.1); raising step made it worse") == \
        "REVISED:\n1. Lower step (now 0.25) by about 10%."
    assert revise("a4 from a1: score 0.6 (parent 0.5, delta +0.1); raising step improved") == "KEEP"
    assert revise("a4 from a1: score 0.6 (parent 0.5, delta +0.1); NEW: lowers scale (3 -> 2).") == \
        "REVISED:\n1. Raise step (now 0.25) by about 10%.\nSince then these directions helped: lower scale."


def test_the_planner_continues_what_the_newest_summary_reports() -> None:
    user = ("Task: t\n\n## Lineage (oldest first)\n1. a1 score 0.5\n   summary: lowering step improved the score\n"
            "2. a2 score 0.6\n   summary: raising scale made it worse (0.6 -> 0.5)\n\n## Solution to improve\n"
            f"```\n{PROGRAM}```")
    system = "evotui-pes-planner: plan"
    reply = answer([{"role": "system", "content": system}, {"role": "user", "content": user}], "plan", random.Random(0))
    assert "1. Lower scale (now 3)" in reply


def test_the_navigator_reads_every_transition_when_summaries_span_lines() -> None:
    chained = "NEW: raises step (0.25 -> 0.28).\nPRESERVES: the initial construction."
    sample = [Transition("a000002", "a000004", 0.6, 0.7, "improvement", chained,
                         "NEW: raises step (0.28 -> 0.3).\nPRESERVES: raises step (0.25 -> 0.28).", 4),
              Transition("a000002", "a000005", 0.6, 0.5, "decline", chained,
                         "NEW: lowers scale (3 -> 2).\nPRESERVES: raises step.", 5)]
    reply = answer(navigator_messages("Maximise.", "", sample), "navigate", random.Random(0))
    assert reply.startswith("Of 2 recent changes, 1 improved, 0 were mixed, 1 declined")
    assert "raise step" in reply and "Avoid lowering scale" in reply
