"""The agent-tools world (engine/tasks/agentworld.py) and its simulator plug-in: the metric's
diagnosis names the component behind each mistake, round_total is read without running it, and
the plug-in answers by content."""

from __future__ import annotations

import random
from pathlib import Path

from engine.llm.sim.plugins import SimRequest
from engine.tasks.agentworld import (ASPECT_OWNER, Rounding, compute, correct_total, diagnose, parse_order,
                                     rounding_of, score)
from engine.tasks.agentworld_sim import FIX_CODE, FIX_TEXT, AgentWorldBehaviour, answer_order, reflect, stated
from engine.tasks.prompt_task import load_task
from engine.tasks.sim_behaviours import all_behaviours

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = {"qty": 3, "item": "lamp", "currency": "EUR"}


def test_task_has_four_evolvable_components_and_a_frozen_one():
    task = load_task(ROOT / "tasks" / "agent_tools")
    parts = {c.name: c.evolvable for c in task.seed_components}
    assert parts == {"system": True, "tool_lookup": True, "tool_convert": True, "round_total": True, "house": False}
    assert "def round_total(x):" in task.seed_prompt
    assert all(parse_order(ex["input"]) is not None for ex in task.train + task.val)


def test_rounding_is_read_from_the_source_without_running_it():
    assert rounding_of("def round_total(x):\n    return round(x, 2)") == Rounding("round", 2)
    assert rounding_of("def round_total(v):\n    return round(v)") == Rounding("round", 0)
    assert rounding_of("import math\ndef round_total(x):\n    return math.floor(x)") == Rounding("truncate")
    assert rounding_of("def round_total(x):\n    return x") == Rounding("none")
    assert rounding_of("def round_total(x) return x") == Rounding("none")  # a syntax error
    # Code that would have a side effect if run is only parsed: nothing happens, no rounding.
    assert rounding_of("def round_total(x):\n    return __import__('os').system('false')") == Rounding("none")


def test_score_diagnoses_each_mistake_and_names_its_component():
    right = correct_total(EXAMPLE)
    assert right == round(3 * 13.95 * 0.92, 2)
    ok = score(EXAMPLE, f"TOTAL: {right:.2f} EUR")
    assert ok["score"] == 1.0
    one_item_cents = compute(EXAMPLE, quantity=False, cents=False, direction=True, rounding=Rounding("round", 2))
    bad = score(EXAMPLE, f"The total is {one_item_cents:.2f} EUR.")
    assert bad["score"] == 2 / 5
    for aspect in ("format", "quantity", "cents"):
        assert f"(component {ASPECT_OWNER[aspect]})" in bad["feedback"]
    assert diagnose(EXAMPLE, one_item_cents) == {"quantity", "cents"}
    assert score(EXAMPLE, "TOTAL: 7.77 EUR")["score"] == 1 / 5  # matches no computation
    assert diagnose({**EXAMPLE, "currency": "USD"}, 3 * 13.95) == set()


def test_agent_reads_each_statement_in_its_own_component():
    task = load_task(ROOT / "tasks" / "agent_tools")
    checks, rounding = stated(task.seed_prompt)
    assert not any(checks.values()) and rounding == Rounding("truncate")
    fixed = task.seed_prompt.replace("lookup(item) -> the catalogue price of an item.",
                                     "lookup(item) -> the catalogue price of an item.\n" + FIX_TEXT["cents"])
    assert stated(fixed)[0]["cents"]
    # The same sentence in the system prompt is not where the agent reads a tool's behaviour.
    misplaced = task.seed_prompt.replace("with its total price.", "with its total price.\n" + FIX_TEXT["cents"])
    assert not stated(misplaced)[0]["cents"]
    perfect = (f"## [system]\n{FIX_TEXT['format']}\n{FIX_TEXT['quantity']}\n\n## [tool_lookup]\n{FIX_TEXT['cents']}"
               f"\n\n## [tool_convert]\n{FIX_TEXT['direction']}\n\n## [round_total]\n{FIX_CODE.format(places=2)}")
    rng = random.Random(1)
    scores = [score(EXAMPLE, answer_order(perfect, EXAMPLE, rng))["score"] for _ in range(200)]
    assert sum(scores) / len(scores) > 0.9


def _propose(target: str, text: str, feedback: str) -> SimRequest:
    user = (f"## Current instructions: component [{target}]\n```\n{text}\n```\n## Examples\n### Example 1\n"
            f"Input:\nOrder: 3 x lamp\nPay in: EUR\nOutput:\nThe total\nScore: 0.20\nFeedback: {feedback}\n")
    return SimRequest(messages=[{"role": "user", "content": user}], stage="propose", kind="propose", system="",
                      user=user)


def test_reflector_fixes_only_what_the_edited_component_owns():
    plug = AgentWorldBehaviour()
    seedlike = compute(EXAMPLE, quantity=False, cents=False, direction=False, rounding=Rounding("truncate"))
    fb = score(EXAMPLE, f"The total is {int(seedlike)} EUR.")["feedback"]
    assert "component round_total" in fb and "component tool_lookup" in fb
    req = _propose("round_total", "def round_total(x):\n    return int(x)", fb)
    assert plug.recognises(req)
    assert type(all_behaviours()[0]) is AgentWorldBehaviour
    replies = [reflect(req.user, random.Random(s)) for s in range(60)]
    assert any("return round(x, 2)" in r for r in replies)
    lookup = [reflect(_propose("tool_lookup", "lookup(item) -> price.", fb).user, random.Random(s)) for s in range(60)]
    assert any(FIX_TEXT["cents"] in r for r in lookup)
    assert not any("round(x, 2)" in r for r in lookup)
    # A rules-task request is left to the other plug-ins.
    rules = SimRequest(messages=[], stage="propose", kind="propose", system="",
                       user="```\nFormat lists.\n```\nInput:\nCategory: fruit\nFeedback: use semicolons\n")
    assert not plug.recognises(rules)


def test_judge_patches_the_best_with_what_a_stale_proposal_gets_right():
    from engine.stages.reflection import build_reflect_messages
    from engine.tasks.agentworld_sim import judge

    task = load_task(ROOT / "tasks" / "agent_tools")
    best = task.seed_prompt.replace(
        "with its total price.", "with its total price.\n" + FIX_TEXT["format"])
    stale = task.seed_prompt.replace("lookup(item) -> the catalogue price of an item.",
                                     "lookup(item) -> the catalogue price of an item.\n" + FIX_TEXT["cents"])
    user = build_reflect_messages(best, task.seed_prompt, stale, 1, 3, [])[-1]["content"]
    req = SimRequest(messages=[], stage="reflect", kind="judge", system="", user=user)
    assert AgentWorldBehaviour().recognises(req)
    verdicts = [judge(user, random.Random(s)) for s in range(40)]
    patched = [v for v in verdicts if v.startswith("VERDICT: patch")]
    assert len(patched) > 30
    body = patched[0].split("```\n", 1)[1].rsplit("```", 1)[0]
    checks, _ = stated(body)
    assert checks["format"] and checks["cents"]  # the best's fix kept, the proposal's taken over
    redundant = build_reflect_messages(stale, task.seed_prompt, stale, 1, 3, [])[-1]["content"]
    assert sum(judge(redundant, random.Random(s)).startswith("VERDICT: discard") for s in range(40)) > 30
