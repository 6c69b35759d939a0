"""Speculation (engine/capabilities/speculation.py) on adapter tasks, and its refusal where it
cannot apply (a program's evaluation has no prefix)."""

from __future__ import annotations

import sqlite3

import evotui
from evotui.cli import main as cli_main
from tests.engine.test_api import SEED, KeywordAdapter, _data


def test_an_adapter_run_inserts_confirms_and_keeps_components(tmp_path):
    """A candidate whose validation prefix beats the best is inserted speculatively and then
    confirmed or removed on full validation; confirmed ones keep their named components."""
    db = tmp_path / "s.db"
    res = evotui.optimize(SEED, _data(6, 0), _data(8, 10), KeywordAdapter(), reflection_llm="sim",
                          max_metric_calls=300, db=db, seed=0, mode="async",
                          config={"sim": {"time_scale": 1000}, "pipeline": {"speculation": True, "spec_alpha": 0.25}})
    with sqlite3.connect(db) as con:
        statuses = dict(con.execute("select artifact_id, status from artifacts"))
        settled = [k for (k,) in con.execute("select kind from pool_events where kind in ('confirmed', 'removed')")]
    assert settled, "no candidate was inserted speculatively: nothing was checked"
    assert "speculative" not in statuses.values()  # every insert was settled
    confirmed = [a for a, st in statuses.items() if st == "confirmed"]
    assert settled.count("confirmed") <= len(confirmed)
    assert all(set(c) == set(SEED) for c in res.candidates)
    assert res.val_aggregate_scores[res.best_idx] > res.val_aggregate_scores[0]


def test_speculation_on_a_program_task_without_a_cascade_is_refused_up_front(tmp_path, capsys):
    toml = tmp_path / "spec.toml"
    toml.write_text('[pipeline]\nmode = "async"\nspeculation = true\n')
    db = tmp_path / "p.db"
    assert cli_main(["run", "circle_packing", "--config", str(toml), "--llm", "sim", "--max-proposals", "2",
                     "--no-ui", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "speculation" in err and "runs no cascade" in err and "Traceback" not in err
    assert not db.exists()
