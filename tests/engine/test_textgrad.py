"""The TextGrad-style optimizer (engine/stages/textgrad.py, issue 36): its config, its two prompts
and their parsers, and the agent-tools simulator's honest answers (the step fixes only what the
critique names)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from engine import components
from engine.components import Component
from engine.llm.sim.answer import answer
from engine.stages import textgrad
from engine.tasks.agentworld_sim import FIX_TEXT
from engine.tasks.agentworld_textgrad_sim import CAUSE
from engine.tasks.prompt_task import TaskError, load_task
from engine.tasks.sim_behaviours import all_behaviours

ROOT = Path(__file__).resolve().parents[2]
PARTS = (Component("system", "Answer with the total.", optimizer="textgrad"),
         Component("tool_lookup", "lookup(item) -> the catalogue price of an item.", optimizer="textgrad"),
         Component("house", "Be polite.", evolvable=False))
TRACES = [{"input": "Order: 2 x apple\nPay in: EUR", "output": "The total is 480 EUR.", "score": 0.4,
           "feedback": "The total is 100 times too large: lookup returns prices in cents, which the lookup tool's "
                       "description (component tool_lookup) does not say."}]


def _copy_task(tmp_path: Path, old: str, new: str) -> Path:
    task = tmp_path / "agent_copy"
    shutil.copytree(ROOT / "tasks" / "agent_tools", task)
    toml = (task / "task.toml").read_text()
    assert old in toml
    (task / "task.toml").write_text(toml.replace(old, new, 1))
    return task


def test_task_toml_optimizer_is_read_and_kept_in_the_rows(tmp_path: Path) -> None:
    task = load_task(str(_copy_task(tmp_path, 'name = "tool_lookup"\n', 'name = "tool_lookup"\noptimizer = "textgrad"\n')))
    by_name = {c.name: c.optimizer for c in task.seed_components}
    assert by_name == {"system": "reflection", "tool_lookup": "textgrad", "tool_convert": "reflection",
                       "round_total": "reflection", "house": "reflection"}
    stored = components.to_json(task.seed_components)
    assert [d.get("optimizer") for d in stored] == [None, "textgrad", None, None, None]  # default left out
    assert components.from_json(stored) == task.seed_components


def test_an_unknown_optimizer_is_a_task_error_naming_task_toml(tmp_path: Path) -> None:
    task = _copy_task(tmp_path, 'name = "tool_lookup"\n', 'name = "tool_lookup"\noptimizer = "sgd"\n')
    with pytest.raises(TaskError) as err:
        load_task(str(task))
    assert str(err.value) == (f"{task / 'task.toml'}: [[component]] component 'tool_lookup': unknown optimizer "
                              "'sgd'; allowed: reflection, textgrad")
    with pytest.raises(ValueError, match="unknown optimizer 'rl'"):
        components.from_json([{"name": "x", "text": "t", "optimizer": "rl"}])


def test_textgrad_is_used_for_one_textgrad_target_only() -> None:
    assert textgrad.uses_textgrad(PARTS, ["tool_lookup"])
    assert not textgrad.uses_textgrad(PARTS, ["system", "tool_lookup"])  # several targets: one reflection call
    assert not textgrad.uses_textgrad(PARTS, ["house"])


def test_the_gradient_sees_the_traces_and_the_step_sees_only_the_critique() -> None:
    grad = textgrad.build_gradient_messages("shop", PARTS, "tool_lookup", TRACES)
    assert grad[0]["content"].startswith(textgrad.GRADIENT_MARKER)
    user = grad[1]["content"]
    assert "Feedback: The total is 100 times too large" in user and "Order: 2 x apple" in user
    first_block = user.split("```\n", 1)[1].split("\n```", 1)[0]
    assert first_block == PARTS[1].text  # the contract: the target is the first ``` block
    step = textgrad.build_apply_messages("shop", PARTS, "tool_lookup", "- it never says cents\n- keep it short")
    user = step[1]["content"]
    assert step[0]["content"].startswith(textgrad.APPLY_MARKER)
    assert "## Critique\n> - it never says cents\n> - keep it short" in user
    assert "Feedback" not in user and "Order:" not in user and "480" not in user


def test_parse_critique_drops_rewrites_and_refuses_an_empty_one() -> None:
    assert textgrad.parse_critique("- cents missing\n```\nnew text\n```\n- too short").text == "- cents missing\n- too short"
    assert textgrad.parse_critique("```\nonly a rewrite\n```") == textgrad.Critique(None, "empty critique (textgrad gradient)")
    assert textgrad.parse_critique(None).text is None
    assert len(textgrad.parse_critique("x" * 10_000).text) == textgrad.CRITIQUE_CHARS


def _sim(messages: list[dict], seed: int) -> str:
    return answer(messages, "propose", random.Random(seed), all_behaviours())


def test_the_simulated_critique_names_causes_without_rewriting() -> None:
    replies = [_sim(textgrad.build_gradient_messages("shop", PARTS, "tool_lookup", TRACES), s) for s in range(40)]
    assert all("```" not in r and r.startswith("Critique of [tool_lookup]:") for r in replies)
    named = sum(CAUSE["cents"] in r for r in replies)
    assert 20 <= named < 40  # diagnosed most of the time, not always (P_DIAGNOSE)
    other = _sim(textgrad.build_gradient_messages("shop", PARTS, "system", TRACES), 0)
    assert "Not caused by this component: 1 failure(s) of the cents check belong to [tool_lookup]" in other


def test_the_simulated_step_fixes_only_what_the_critique_names() -> None:
    def step(critique: str, seed: int) -> str:
        reply = _sim(textgrad.build_apply_messages("shop", PARTS, "tool_lookup", critique), seed)
        return reply.split("```\n", 1)[1].split("\n```", 1)[0]

    named = f"- In 1 example(s) the cents check failed because {CAUSE['cents']}."
    fixed = [FIX_TEXT["cents"] in step(named, s) for s in range(40)]
    assert sum(fixed) >= 30
    vague = [step("- The text could be clearer; some answers still went wrong.", s) for s in range(40)]
    assert not any(FIX_TEXT["cents"] in t for t in vague)
    assert all(t.startswith(PARTS[1].text) and t != PARTS[1].text for t in vague)  # a generic line, not a fix


def test_the_simulator_reads_the_markers_textgrad_writes() -> None:
    from engine.llm.sim import textgrad_answers

    assert textgrad_answers.MARKER == textgrad.MARKER
    assert textgrad.GRADIENT_MARKER == f"{textgrad_answers.MARKER} gradient"


RULE_PARTS = (Component("role", "You are a helpful assistant."),
              Component("format", "Format the given items as a list on a single line.", optimizer="textgrad"))
RULE_TRACES = [{"input": f"Category: fruit\nItems: kiwi, apple {n}", "output": "kiwi, apple", "score": 0.5,
                "feedback": fb} for n, fb in enumerate(["Separate the items with semicolons.",
                                                        "Separate the items with semicolons.",
                                                        "Sort the items alphabetically."])]
RULE_TRACES.append({"input": "Category: tools\nItems: saw", "output": "[saw]", "score": 1.0, "feedback": "Correct."})


def test_a_task_without_a_textgrad_plugin_gets_the_generic_critique_and_step() -> None:
    """The rules reflector declines both calls (it would answer a gradient with a rewrite); the
    generic gradient quotes the feedback, the generic step adds what the critique says."""
    reply = _sim(textgrad.build_gradient_messages("lists", RULE_PARTS, "format", RULE_TRACES), 0)
    assert reply == ("Critique:\n- 2 example(s): Separate the items with semicolons.\n"
                     "- 1 example(s): Sort the items alphabetically.")
    assert textgrad.parse_critique(reply).text == reply
    step = _sim(textgrad.build_apply_messages("lists", RULE_PARTS, "format", reply), 0)
    new = step.split("```\n", 1)[1].split("\n```", 1)[0]
    assert new == ("Format the given items as a list on a single line.\nSeparate the items with semicolons.\n"
                   "Sort the items alphabetically.")
    empty = _sim(textgrad.build_apply_messages("lists", RULE_PARTS, "format", "- nothing specific"), 0)
    assert "```\nFormat the given items as a list on a single line.\n```" in empty  # nothing named, nothing added
