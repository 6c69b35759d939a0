"""evotui.optimize with an adapter class the `gepa` package ships (the test-only extra `gepa`).

GEPA's DefaultAdapter takes the task model as a callable; here that callable is the rule world's
simulated task model and the evaluator is the rules task's metric, so the run is offline and the
simulated reflector (which reads the metric's feedback) can improve the prompt.
"""

from __future__ import annotations

import os
import random

import pytest

import evotui
from engine.tasks.loader import load_any_task
from engine.tasks.ruleworld import parse_input
from engine.tasks.ruleworld_sim import answer_example

try:
    import gepa.adapters.default_adapter.default_adapter as gepa_default
except ImportError:
    # CI installs the extra and sets EVOTUI_REQUIRE_PEERS=1: there a missing package fails the test.
    if os.environ.get("EVOTUI_REQUIRE_PEERS") == "1":
        raise
    pytest.skip("the gepa package is not installed (pip install -e '.[gepa]')", allow_module_level=True)


def _adapter_and_data():
    task = load_any_task("rules")
    rng = random.Random(7)

    def model(messages) -> str:  # the DefaultAdapter's ChatCompletionCallable
        return answer_example(messages[0]["content"], parse_input(messages[1]["content"]), rng)

    by_input = {}

    def evaluator(data, response):
        result = task.score(by_input[data["input"]], response)
        return gepa_default.EvaluationResult(score=result.score, feedback=result.feedback)

    def convert(examples):
        out = []
        for ex in examples:
            text = task.user_message(ex)
            by_input[text] = ex
            out.append({"input": text, "additional_context": {}, "answer": ""})
        return out

    adapter = gepa_default.DefaultAdapter(model=model, evaluator=evaluator)
    return task, adapter, convert(task.train[:12]), convert(task.val[:8])


def test_gepa_default_adapter_runs_unchanged(tmp_path):
    task, adapter, train, val = _adapter_and_data()
    res = evotui.optimize({"system_prompt": task.seed_prompt}, train, val, adapter, reflection_llm="sim",
                          max_metric_calls=200, db=tmp_path / "gepa.db", config={"sim": {"time_scale": 1000}})
    assert res.status == "completed"
    assert res.candidates[0] == {"system_prompt": task.seed_prompt} and res.parents[0] == [None]
    assert len(res.candidates) == len(res.parents) == len(res.val_aggregate_scores) == len(res.val_subscores) >= 2
    assert all(len(s) == len(val) for s in res.val_subscores)
    assert res.val_aggregate_scores[res.best_idx] > res.val_aggregate_scores[0]
    assert 0 < res.total_metric_calls <= 200 + len(val)
