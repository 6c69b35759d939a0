"""Mode chain for the adapter kind (evotui.optimize): the gated chain of engine/capabilities/
gated_chain.py with each gate side one `adapter.evaluate` call, and its default there."""

from __future__ import annotations

import json
import sqlite3
import pytest

import evotui
from tests.engine.test_api import SEED, KeywordAdapter, SliceLog, _data


def _run(tmp_path, adapter, **kw):
    options = dict(reflection_llm="sim", max_metric_calls=200, db=tmp_path / "c.db", seed=0,
                   config={"sim": {"time_scale": 1000}})
    options.update(kw)
    return evotui.optimize(SEED, _data(6, 0), _data(4, 10), adapter, **options)


def _items(db, run_id) -> dict[str, dict]:
    with sqlite3.connect(db) as con:
        rows = con.execute("select item_id, payload_json from items where run_id = ?", (run_id,)).fetchall()
    return {item: json.loads(payload) for item, payload in rows}


def _mode(db, run_id) -> str:
    with sqlite3.connect(db) as con:
        (config,) = con.execute("select config_json from runs where run_id = ?", (run_id,)).fetchone()
    return json.loads(config)["pipeline"]["mode"]


@pytest.mark.parametrize("mode", [None, "chain"])
def test_an_adapter_run_chains_steps_at_the_gate_and_improves(tmp_path, mode):
    """No mode named: chain, evotui's default for the adapter kind. Steps after the first start at
    propose from the gate's traced batch (no rollout of their own), and the result improves."""
    adapter = SliceLog()
    res = _run(tmp_path, adapter, **({"mode": mode} if mode else {}))
    assert res.status == "completed" and _mode(tmp_path / "c.db", res.run_id) == "chain"
    assert res.val_aggregate_scores[res.best_idx] > res.val_aggregate_scores[0]
    items = _items(tmp_path / "c.db", res.run_id)
    handed = [i for i, p in items.items() if p.get("chain_of")]
    assert handed, "no step was handed on at a gate"
    # A gate runs the candidate's own minibatch untraced and both next-minibatch sides traced.
    assert (3, True) in adapter.log and adapter.log.count((3, True)) > len(items) - len(handed)
    assert all(set(c) == set(SEED) for c in res.candidates)


def test_a_chain_candidate_that_fails_its_gate_hands_the_head_s_batch_on(tmp_path):
    """The reflective dataset of a step handed on after a failed gate comes from the head's traced
    batch on the next minibatch: those steps propose (none fails with 'rollout traces lost')."""
    # 8 chains (the adapter kind's own count is 1): more steps at once, so some gates fail.
    res = _run(tmp_path, KeywordAdapter(), mode="chain", max_metric_calls=400,
               config={"sim": {"time_scale": 1000}, "pipeline": {"chains": 8}})
    with sqlite3.connect(tmp_path / "c.db") as con:
        rows = con.execute("select item_id, outcome, payload_json from items where run_id = ?", (res.run_id,)).fetchall()
    outcome = {i: o for i, o, _ in rows}
    payload = {i: json.loads(p) for i, _, p in rows}
    after_rejection = [i for i, p in payload.items() if outcome.get(p.get("chain_of")) == "rejected"]
    assert after_rejection, "no gate failed in this run: nothing was checked"
    assert all(payload[i].get("proposal") == "made" or "traces lost" not in str(payload[i].get("reason"))
               for i in after_rejection)
    assert any(payload[i].get("proposal") == "made" for i in after_rejection)


def test_a_strategy_without_a_gate_is_refused_in_mode_chain(tmp_path):
    with pytest.raises(ValueError, match="minibatch gate"):
        _run(tmp_path, KeywordAdapter(), mode="chain", strategy="openevolve")
