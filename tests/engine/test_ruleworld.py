"""The rule world: rules, metric, data files, simulated model and simulated reflection."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import time
import tomllib
from pathlib import Path

import pytest

from engine.llm.sim.answer import answer as sim_answer
from engine.llm.sim.answer import truncate
from engine.tasks.ruleworld import (
    RULES,
    classify,
    generate_examples,
    parse_input,
    prompt_status,
    score,
)
from engine.tasks.ruleworld_sim import RuleWorldBehaviour, answer_example, reflect, render

TASK = Path(__file__).resolve().parents[2] / "tasks" / "rules"
ALL_RULES = "\n".join(r.statement for r in RULES)


def answer(messages: list[dict], stage: str, rng: random.Random) -> str:
    """The simulator's reply with the rules task's plug-in, as the engine's backend has it."""
    return sim_answer(messages, stage, rng, (RuleWorldBehaviour(),))


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASK / name).read_text().splitlines()]


def val_mean(prompt: str, examples: list[dict], rng: random.Random) -> float:
    return sum(score(ex, answer_example(prompt, parse_input(ex["input"]), rng))["score"]
               for ex in examples) / len(examples)


def test_task_folder_is_complete_and_reproducible() -> None:
    meta = tomllib.loads((TASK / "task.toml").read_text())
    assert meta["name"] == "rules" and meta["kind"] == "prompt"
    assert meta["metric"] == {"file": "metric.py", "function": "score"}
    train, val = load(meta["train"]), load(meta["val"])
    assert len(train) == 60 and len(val) == 30
    assert train == generate_examples(1, 60, "train") and val == generate_examples(2, 30, "val")
    assert len({ex["id"] for ex in train + val}) == 90
    spec = importlib.util.spec_from_file_location("rules_metric", TASK / meta["metric"]["file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.score(val[0], "nothing useful")
    assert out["score"] == 0.0 and "missing" in out["feedback"]
    seed = (TASK / meta["seed_prompt"]).read_text()
    assert set(prompt_status(seed).values()) == {"none"}


def test_examples_are_readable_and_leak_no_answer() -> None:
    for ex in generate_examples(4, 40, "x"):
        assert parse_input(ex["input"]) == {k: ex[k] for k in ("category", "items", "priority", "audience")}
        assert 2 <= len(set(ex["items"])) <= 7
        assert " ; " not in ex["input"] and "!!" not in ex["input"] and "[" not in ex["input"]
    cats = [ex["category"] for ex in generate_examples(4, 40, "x")]
    assert all(cats.count(c) == 8 for c in set(cats))


def test_every_rule_sentence_is_recognised_and_nothing_else() -> None:
    for rule in RULES:
        for text in (rule.statement, *rule.paraphrases, rule.feedback):
            assert classify(text) == [(rule.id, "right")], text
        assert classify(rule.wrong) == [(rule.id, "wrong")], rule.wrong


@pytest.mark.parametrize("text, expected", [
    ("Sort fruits from A to Z.", {"fruit_alpha": "right"}),
    ("Fruit lists should be in alphabetical order.", {"fruit_alpha": "right"}),
    ("List fruit in reverse alphabetical order.", {"fruit_alpha": "wrong"}),
    ("Use ' ; ' as the separator between items.", {"separator": "right"}),
    ("Separate items with semicolons.", {"separator": "right"}),
    ("Write vegetables in capital letters.", {"veg_upper": "right"}),
    ("Enclose tool lists in square brackets.", {"tool_brackets": "right"}),
    ("Enclose tool lists in round brackets.", {"tool_brackets": "wrong"}),
    ("Capitalize animal names.", {"animal_title": "right"}),
    ("Sort colors by length, shortest first.", {"color_length": "right"}),
    ("If the priority is high, append ' !!' at the end.", {"priority_bang": "right"}),
    ("For a kids audience, prefix the line with '* '.", {"kids_star": "right"}),
    ("Don't repeat items; remove duplicates.", {"dedupe": "right"}),
    ("If there are more than four items, put the number of items and a colon first.",
     {"count_prefix": "right"}),
    ("Be concise and careful.", {}),
])
def test_paraphrases_of_a_real_llm_count(text: str, expected: dict) -> None:
    status = {k: v for k, v in prompt_status(text).items() if v != "none"}
    assert status == expected


def test_conflicting_statements_are_detected() -> None:
    rule = RULES[3]
    assert prompt_status(f"{rule.statement}\n{rule.wrong}")[rule.id] == "both"


def test_score_matches_rendered_behaviour() -> None:
    examples = generate_examples(9, 50, "s")
    for ex in examples:
        right = render(ex, {r.id: "right" for r in RULES})
        assert score(ex, right) == {"score": 1.0, "feedback": "Correct."}, right
        for rule in RULES:
            if not rule.applies(ex):
                continue
            choice = {r.id: "right" for r in RULES}
            choice[rule.id] = "wrong"
            out = score(ex, render(ex, choice))
            if out["score"] < 1.0:  # a wrong variant can coincide with the rule (e.g. sorted input)
                assert rule.feedback in out["feedback"]
    # a real LLM adds prose and fences; the last answer line is what counts
    ex = examples[0]
    assert score(ex, f"Sure! Here it is:\n```\n{render(ex, {r.id: 'right' for r in RULES})}\n```")["score"] == 1.0


def test_score_is_robust_to_junk() -> None:
    ex = generate_examples(2, 1, "j")[0]
    for junk in ("", "\n\n", "```", "!!", "* ", "[]", "12: ()", "a" * 10_000, "\x00;;;,,,"):
        out = score(ex, junk)
        assert out["score"] == 0.0 and out["feedback"].startswith("The answer must list")


def test_sim_model_scores_low_for_seed_and_high_for_all_rules() -> None:
    val = load("val.jsonl")
    seed = (TASK / "seed_prompt.txt").read_text()
    rng = random.Random(0)
    seed_scores = [val_mean(seed, val, rng) for _ in range(5)]
    all_scores = [val_mean(ALL_RULES, val, rng) for _ in range(5)]
    wrong_scores = [val_mean("\n".join(r.wrong for r in RULES), val, rng) for _ in range(2)]
    assert sum(seed_scores) / 5 <= 0.45 and max(seed_scores) <= 0.45
    assert sum(all_scores) / 5 >= 0.85 and min(all_scores) >= 0.8
    assert max(wrong_scores) < 0.1


def propose_text(prompt: str, batch: list[dict], outputs: list[str], results: list[dict]) -> str:
    parts = ["I gave an assistant these instructions:", "```", prompt, "```", "Examples:"]
    for ex, out, res in zip(batch, outputs, results):
        parts += [f"Input:\n{ex['input']}", f"Output:\n{out}", f"Feedback: {res['feedback']}"]
    parts.append("Write improved instructions in one fenced block.")
    return "\n".join(parts)


def test_iterated_reflection_raises_the_score() -> None:
    train, val = load("train.jsonl"), load("val.jsonl")
    rng = random.Random(1)
    prompt = (TASK / "seed_prompt.txt").read_text().strip()
    start = val_mean(prompt, val, rng)
    accepted = 0
    for _ in range(30):
        batch = rng.sample(train, 3)
        outs = [answer([{"role": "system", "content": prompt}, {"role": "user", "content": ex["input"]}],
                       "rollout", rng) for ex in batch]
        results = [score(ex, o) for ex, o in zip(batch, outs)]
        reply = answer([{"role": "user", "content": propose_text(prompt, batch, outs, results)}], "propose", rng)
        m = re.search(r"```\n(.*?)\n```", reply, re.S)
        assert m and reply.startswith("Reasoning:")
        child = m.group(1)
        before = sum(r["score"] for r in results)
        after = sum(score(ex, answer_example(child, parse_input(ex["input"]), rng))["score"] for ex in batch)
        if after > before:
            prompt, accepted = child, accepted + 1
    end = val_mean(prompt, val, rng)
    assert start <= 0.3 and end >= start + 0.4 and accepted >= 5


def test_reflector_sees_only_request_text() -> None:
    rng = random.Random(5)
    assert reflect("no fence here\nFeedback: Fruit items were not in alphabetical order (A to Z).", rng) is None
    assert reflect("```\nDo it.\n```\nno feedback lines", rng) is None
    fixed = 0
    for _ in range(200):
        reply = reflect("```\nSort fruit lists in reverse alphabetical order (Z to A).\n```\n"
                        "Feedback: Fruit items were not in alphabetical order (A to Z).", rng)
        new = re.search(r"```\n(.*?)\n```", reply, re.S).group(1)
        fixed += prompt_status(new)["fruit_alpha"] == "right"
    assert 70 < fixed < 150  # about half: otherwise vague advice or a conflicting restatement


def test_generic_answers_and_truncation() -> None:
    rng = random.Random(2)
    code = "Improve this:\n```python\ndef f():\n    return 1\n```"
    out = answer([{"role": "user", "content": code}], "propose", rng)
    body = re.search(r"```python\n(.*?)```", out, re.S).group(1)
    assert "def f():" in body and body.rstrip().splitlines()[-1].startswith("# ")
    assert answer([{"role": "user", "content": "What is 2+2?"}], "rollout", rng)
    assert answer([{"role": "user", "content": [{"type": "text", "text": "hello"}]}], "default", rng)
    cut = truncate("Reasoning: ok\n```\nline one\nline two\n```")
    assert cut.count("```") < 2


def test_answers_and_scores_are_cheap() -> None:
    val = load("val.jsonl")
    rng = random.Random(3)
    t0 = time.perf_counter()
    for k in range(2000):
        ex = val[k % len(val)]
        out = answer([{"role": "system", "content": ALL_RULES + str(k % 5)},
                      {"role": "user", "content": ex["input"]}], "evaluate", rng)
        score(ex, out)
    assert (time.perf_counter() - t0) / 2000 < 0.0005  # well under half a millisecond per pair
