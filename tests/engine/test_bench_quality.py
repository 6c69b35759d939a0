"""The bench's held-out re-scoring (evotui/bench/quality.py): what it measures and why."""

from __future__ import annotations

import statistics

import pytest

from engine.tasks.loader import load_any_task
from engine.tasks.ruleworld import RULES
from evotui.bench import quality as bench_quality

FULL = "Format the list on one line.\n" + "\n".join(r.statement for r in RULES)


@pytest.fixture(scope="module")
def rules():
    return load_any_task("rules")


async def test_a_prompt_stating_every_rule_scores_far_above_the_seed(rules):
    full = await bench_quality.heldout_score(rules, FULL, seed=0)
    seed = await bench_quality.heldout_score(rules, rules.seed_prompt, seed=0)
    assert full is not None and seed is not None
    assert full > 0.8 and seed < 0.3 and full - seed > 0.5


class _Counting:
    """The task, counting the examples it is asked to render (PromptTask is frozen)."""

    def __init__(self, task) -> None:
        self.task, self.asked = task, []
        self.kind, self.heldout, self.score = task.kind, task.heldout, task.score

    def user_message(self, example: dict) -> str:
        self.asked.append(example["id"])
        return self.task.user_message(example)


async def test_each_held_out_example_is_answered_repeats_times(rules):
    counting = _Counting(rules)
    await bench_quality.heldout_score(counting, FULL, seed=1, repeats=3)
    asked = counting.asked
    assert len(asked) == 3 * len(rules.heldout)
    assert set(asked) == {ex["id"] for ex in rules.heldout}


async def test_program_tasks_have_no_held_out_score():
    task = load_any_task("circle_packing")
    assert not bench_quality.available(task)
    assert await bench_quality.heldout_score(task, "x = 1\n", seed=0) is None


async def test_held_out_scores_of_one_prompt_differ_only_by_the_model_s_noise(rules):
    """Other seeds are other draws of the same prompt's answers, close to each other: the
    spread a row's `held` carries is the model's temperature."""
    got = [await bench_quality.heldout_score(rules, FULL, seed=s) for s in range(4)]
    assert max(got) - min(got) < 0.06 and statistics.mean(got) > 0.85


async def test_two_wordings_of_the_same_rules_get_the_same_held_out_score(rules):
    """Common random numbers: every prompt's k-th answer to an example uses the same draws (the
    simulator's `heldout` stage), so rows differ by what their prompts say, not by noise."""
    reordered = "Format the list on one line.\n" + "\n".join(r.statement for r in reversed(RULES))
    assert reordered != FULL
    same = [await bench_quality.heldout_score(rules, text, seed=2, repeats=3) for text in (FULL, reordered)]
    assert same[0] == same[1]
    assert await bench_quality.heldout_score(rules, FULL, seed=3, repeats=3) != same[0]  # other seed, other draws
