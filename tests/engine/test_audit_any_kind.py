"""Audit records (engine/capabilities/audit.py) are a capability, not a prompt-kind mixin: an
audited strategy (SEPL) records every transition in mode chain and on adapter tasks too."""

from __future__ import annotations

import sqlite3
from collections import defaultdict

import pytest

import evotui
from evotui.cli import main as cli_main
from tests.engine.test_api import SEED, KeywordAdapter, _data

TRANSITIONS = ["reflect", "select", "improve", "evaluate", "commit"]


def _audit(db) -> dict[str, list[tuple[str, str]]]:
    """item id -> its (transition, decision) rows in order."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    with sqlite3.connect(db) as con:
        for item, transition, decision in con.execute(
                "select item_id, transition, decision from audit where transition != 'hot_swap' order by rowid"):
            out[item].append((transition, decision))
    return out


def _check_accepted(rows: dict[str, list[tuple[str, str]]]) -> None:
    accepted = [item for item, r in rows.items() if ("commit", "accepted") in r]
    assert accepted, "no proposal was accepted: nothing was checked"
    for item in accepted:
        assert [t for t, _ in rows[item]] == TRANSITIONS, (item, rows[item])
        assert dict(rows[item])["evaluate"] == "passed"


def test_sepl_in_mode_chain_audits_every_transition(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert cli_main(["run", "rules", "--mode", "chain", "--strategy", "sepl", "--llm", "sim", "--max-proposals", "8",
                     "--no-ui", "--db", str(db)]) == 0
    rows = _audit(db)
    _check_accepted(rows)
    # A chain head that a newer one superseded, or a rejected candidate, still gets its commit row.
    ended = [r[-1] for r in rows.values() if r[-1][1] != "accepted"]
    assert all(t == "commit" for t, _ in ended)


@pytest.mark.parametrize("mode", ["chain", "async"])
def test_sepl_on_an_adapter_task_audits_every_transition(tmp_path, mode):
    res = evotui.optimize(SEED, _data(6, 0), _data(4, 10), KeywordAdapter(), reflection_llm="sim",
                          max_metric_calls=150, db=tmp_path / "a.db", seed=0, strategy="sepl", mode=mode,
                          config={"sim": {"time_scale": 1000}})
    assert res.status == "completed"
    _check_accepted(_audit(tmp_path / "a.db"))


def test_an_audited_strategy_is_refused_on_a_program_task(tmp_path, capsys):
    assert cli_main(["run", "circle_packing", "--strategy", "sepl", "--llm", "sim", "--max-proposals", "2",
                     "--no-ui", "--db", str(tmp_path / "p.db")]) == 2
    err = capsys.readouterr().err
    assert "sepl" in err and "Traceback" not in err
