"""Issue 36: code that reads `gepa.optimize`'s result runs unchanged on `evotui.optimize`'s.

`read_like_a_gepa_user` is written against GEPAResult (gepa 0.1.x): it is first run on a real
gepa.optimize result (so it is valid GEPA code), then on evotui's. The counts are then checked
against what the adapter itself saw: which batches were the whole valset, and how many metric
calls had been made before each candidate's full validation.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

import evotui
from tests.engine.test_api import SEED, STATEMENT, KeywordAdapter, _data

gepa = pytest.importorskip("gepa")
from gepa.core.result import GEPAResult  # noqa: E402


def read_like_a_gepa_user(result) -> dict:
    """What a script written for gepa.optimize does with its result."""
    best = result.best_candidate
    assert result.val_aggregate_scores[result.best_idx] == max(result.val_aggregate_scores)
    assert len(result.candidates) == result.num_candidates == len(result.discovery_eval_counts)
    for idx, subscores in enumerate(result.val_subscores):
        for val_id, score in subscores.items():
            if idx in result.per_val_instance_best_candidates[val_id]:
                assert score == max(s[val_id] for s in result.val_subscores)
    front = {val_id: sorted(progs) for val_id, progs in result.per_val_instance_best_candidates.items()}
    data = result.to_dict()
    json.dumps(data)  # JSON-safe, as GEPA's is
    back = GEPAResult.from_dict(data)
    assert back.candidates == result.candidates and back.best_idx == result.best_idx
    assert back.discovery_eval_counts == result.discovery_eval_counts
    assert {k: sorted(v) for k, v in back.per_val_instance_best_candidates.items()} == front
    return {"best": best, "n": result.num_candidates, "instances": result.num_val_instances, "front": front,
            "found_at": list(result.discovery_eval_counts), "full_evals": result.num_full_val_evals,
            "total": result.total_metric_calls, "run_dir": result.run_dir, "seed": result.seed}


class RecordingAdapter(KeywordAdapter):
    """KeywordAdapter that notes, per full-valset call, the candidate and the calls made before."""

    def __init__(self, valset: list[dict]) -> None:
        super().__init__()
        self.val_questions = [ex["question"] for ex in valset]
        self.full_val: list[tuple[dict, int]] = []

    def evaluate(self, batch, candidate, capture_traces=False):
        if [ex["question"] for ex in batch] == self.val_questions:
            self.full_val.append((dict(candidate), sum(self.calls)))
        return super().evaluate(batch, candidate, capture_traces)


class GepaKeywordAdapter(KeywordAdapter):
    """The same adapter returning gepa's own EvaluationBatch, as gepa.optimize requires."""

    propose_new_texts = None  # gepa reads the attribute; None: its reflection LM proposes

    def evaluate(self, batch, candidate, capture_traces=False):
        from gepa.core.adapter import EvaluationBatch

        b = super().evaluate(batch, candidate, capture_traces)
        return EvaluationBatch(outputs=b.outputs, scores=b.scores, trajectories=b.trajectories)


def _reflection_lm(prompt: str) -> str:
    """For gepa.optimize: a rewrite that states the rules the feedback in the prompt names."""
    stated = [text for text in STATEMENT.values() if text in prompt]
    return "```\nAnswer the question. " + " ".join(stated[:3]) + "\n```"


def test_a_gepa_script_reads_evotuis_result(tmp_path) -> None:
    train, val = _data(6, 0), _data(4, 10)
    ours = gepa.optimize(seed_candidate=dict(SEED), trainset=train, valset=val, adapter=GepaKeywordAdapter(),
                         reflection_lm=_reflection_lm, max_metric_calls=40, seed=0)
    gepa_view = read_like_a_gepa_user(ours)
    assert gepa_view["instances"] == len(val) and gepa_view["n"] >= 2  # the script read a real search

    adapter = RecordingAdapter(val)
    res = evotui.optimize(dict(SEED), train, val, adapter, reflection_llm="sim", max_metric_calls=150,
                          db=tmp_path / "api.db", seed=5, mode="sync",
                          # whole-valset calls, so the adapter can tell a full validation by its batch
                          config={"sim": {"time_scale": 1000}, "pipeline": {"adapter_split": None}})
    view = read_like_a_gepa_user(res)
    assert view["seed"] == 5 and view["run_dir"] == str(tmp_path.resolve())
    assert view["instances"] == len(val) and view["n"] >= 2
    assert view["total"] == sum(adapter.calls)
    # Every full-valset call the adapter served, the seed's included (GEPA counts it too).
    assert view["full_evals"] == len(adapter.full_val)
    # A candidate's discovery count: the calls made before its (last) full validation; seed 0.
    before = {json.dumps(c, sort_keys=True): n for c, n in adapter.full_val}
    assert view["found_at"][0] == 0
    for cand, found_at in zip(res.candidates[1:], view["found_at"][1:]):
        assert found_at == before[json.dumps(cand, sort_keys=True)]
    # The front, recomputed from a fresh evaluation of every candidate on the valset.
    fresh = [KeywordAdapter().evaluate(val, c).scores for c in res.candidates]
    for j in range(len(val)):
        top = max(s[j] for s in fresh)
        assert view["front"][j] == [i for i, s in enumerate(fresh) if s[j] == top]


def test_discovery_counts_are_in_the_database(tmp_path) -> None:
    """The count survives the process: each accepted candidate's pool_events row holds it."""
    train, val = _data(6, 0), _data(4, 10)
    db = tmp_path / "api.db"
    res = evotui.optimize(dict(SEED), train, val, KeywordAdapter(), reflection_llm="sim", max_metric_calls=80,
                          db=db, seed=0, config={"sim": {"time_scale": 1000}})
    with sqlite3.connect(db) as conn:
        rows = dict(conn.execute("SELECT artifact_id, json_extract(detail_json, '$.metric_calls') FROM pool_events "
                                 "WHERE run_id=? AND artifact_id IS NOT NULL", (res.run_id,)).fetchall())
    for aid, found_at in zip(res.artifact_ids[1:], res.discovery_eval_counts[1:]):
        assert rows[aid] - len(val) == found_at and 0 <= found_at < res.total_metric_calls
