"""The overrides world: rules with exceptions, its metric and data files, and its simulated model
and reflector, checked for the property the task exists for: edits interact."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from engine.llm.sim.answer import answer as sim_answer
from engine.tasks.loader import load_any_task
from engine.tasks.overrideworld import (PRECEDENCE, RULES, canonical_prompt, classify, expected, generate_examples,
                                       parse_input, read_prompt, score, statement)
from engine.tasks.overrideworld_sim import OverrideWorldBehaviour, answer_example, reflect
from engine.tasks.ruleworld_sim import RuleWorldBehaviour

TASK = Path(__file__).resolve().parents[2] / "tasks" / "overrides"
EXAMPLES = generate_examples(7, 200, "t")
BASES = "\n".join(statement(a.name, a.base, None) for a in RULES.values())
SEED = (TASK / "seed_prompt.txt").read_text()


def quality(prompt: str, repeats: int = 3) -> float:
    rng = random.Random(0)
    return statistics.mean(score(ex, answer_example(prompt, ex, rng))["score"] for ex in EXAMPLES for _ in range(repeats))


def test_task_folder_loads_with_disjoint_splits() -> None:
    task = load_any_task("overrides")
    assert task.kind == "prompt" and (len(task.train), len(task.val), len(task.heldout)) == (60, 30, 30)
    ids = [ex["id"] for ex in [*task.train, *task.val, *task.heldout]]
    assert len(ids) == len(set(ids))
    on_disk = [json.loads(line) for line in (TASK / "heldout.jsonl").read_text().splitlines()]
    assert on_disk == generate_examples(303, 30, "heldout")  # the files are the generator's, reproducibly
    for ex in task.train:
        assert parse_input(ex["input"]) == {k: ex[k] for k in ("kind", "items", "urgent", "audience")}


def test_metric_checks_each_aspect_against_the_exception_when_it_applies() -> None:
    ex = {"kind": "tool", "items": ["Saw", "Drill", "Clamp"], "urgent": True, "audience": "kids"}
    assert expected(ex) == {"case": "upper", "order": "given", "separator": "pipe", "ending": "bang"}
    assert score(ex, "Reasoning: ...\nSAW | DRILL | CLAMP !!") == {"score": 1.0, "feedback": "Correct."}
    wrong = score(ex, "clamp ; drill ; saw.")  # every base rule, none of the exceptions
    assert wrong["score"] == 0.0 and wrong["feedback"].count("Style rule broken:") == 4
    assert score(ex, "SAW | DRILL !!")["score"] == 0.0  # an item missing is a content error


def test_a_sentence_is_read_with_its_condition() -> None:
    assert classify("For urgent orders, write the items in UPPERCASE.") == [("case", "upper", "urgent")]
    assert classify("Write the items in UPPERCASE.") == [("case", "upper", None)]
    assert classify(statement("ending", "bang", "urgent")) == [("ending", "bang", "urgent")]  # "instead of a period"
    assert read_prompt(canonical_prompt()).precedence and not read_prompt(BASES).precedence


def test_edits_interact_stacking_lines_does_not_win() -> None:
    """The task's point: what each edit adds depends on the others."""
    canonical, seed = quality(canonical_prompt()), quality(SEED)
    without_precedence = quality(canonical_prompt().replace(PRECEDENCE, ""))
    bases = quality(BASES)
    stacked = quality(BASES + "\n" + "\n".join(statement(a.name, a.exception, None) for a in RULES.values()))
    assert seed < 0.2 and canonical > 0.88
    assert without_precedence < canonical - 0.1  # scoped exceptions alone leave the model torn
    assert stacked < bases  # unscoped exceptions (each fixing its own minibatch) lose together


def test_reflector_reads_the_metric_feedback_and_is_fallible() -> None:
    request = f"Current instructions:\n```\n{SEED}\n```\nFeedback: Style rule broken: items must be in UPPERCASE " \
              "because the order is urgent."
    outcomes = {"scoped": 0, "unscoped": 0, "other": 0}
    for seed in range(300):
        reply = reflect(request, random.Random(seed))
        stated = read_prompt(reply.split("```")[1]).statements
        key = "scoped" if ("case", "upper", "urgent") in stated else "unscoped" if ("case", "upper", None) in stated \
            else "other"
        outcomes[key] += 1
    # mostly scoped, often over-general (P_UNSCOPED), sometimes vague (P_VAGUE): a model, not an oracle
    assert outcomes["scoped"] > outcomes["unscoped"] > 40 and outcomes["other"] > 20


def test_simulator_routes_this_tasks_requests_to_its_plugin() -> None:
    behaviours = (OverrideWorldBehaviour(), RuleWorldBehaviour())
    ex = EXAMPLES[0]
    messages = [{"role": "system", "content": canonical_prompt()}, {"role": "user", "content": ex["input"]}]
    reply = sim_answer(messages, "rollout", random.Random(1), behaviours)
    assert score(ex, reply)["score"] > 0  # answered as this task's model, not the generic filler
    rules_input = "Category: fruit\nItems: apple, fig\nPriority: high\nAudience: kids\nWrite the formatted list on one line."
    assert parse_input(rules_input) is None  # the rules task's examples stay the rules plug-in's
