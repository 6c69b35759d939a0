"""The Python side of restore / versions / hot-swap (evotui.restore, evotui.component_versions,
evotui.edit_component): refusals are ValueErrors with the reason, and a refused call writes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import evotui
from tests.e2e.conftest import FAST, evotui as cli, summary_of


def _run(db: Path, proposals: int) -> str:
    """Mode sync: the same seed commits the same versions on any machine, so the larger run has
    versions the smaller one lacks (in async mode that held only by timing)."""
    res = cli("run", "agent_tools", "--no-ui", "--mode", "sync", "--db", str(db), "--max-proposals", str(proposals),
              *FAST)
    assert res.returncode == 0, res.stderr[-2000:]
    return summary_of(res)["run_id"]


def _events(db: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT run_id, version, kind, artifact_id FROM pool_events ORDER BY run_id, version").fetchall()
    finally:
        con.close()


def test_python_refusals_are_value_errors_and_write_nothing(db):
    small, large = _run(db, 2), _run(db, 14)
    mine = {(n, v["version"]) for n, c in evotui.component_versions(small, db=db)["components"].items()
            for v in c["versions"]}
    theirs = evotui.component_versions(large, db=db)
    only_theirs = [(n, v["version"]) for n, c in theirs["components"].items() for v in c["versions"]
                   if (n, v["version"]) not in mine]
    assert only_theirs, theirs
    before = _events(db)
    name, version = only_theirs[0]
    with pytest.raises(ValueError, match=f"belongs to run {large}, not to run {small}"):
        evotui.restore(small, f"{name}@{version}", db=db)
    with pytest.raises(ValueError, match="has no component 'nosuch'"):
        evotui.restore(small, "nosuch@1.0.0", db=db)
    with pytest.raises(ValueError, match="has no component 'nosuch'"):
        evotui.component_versions(small, db=db, component="nosuch")
    with pytest.raises(ValueError, match="a hot-swap edits a live run"):
        evotui.edit_component(small, "system", "Answer.", db=db)
    with pytest.raises(ValueError, match="no run 'zz'"):
        evotui.edit_component("zz", "system", "Answer.", db=db)
    with pytest.raises(ValueError, match="no database"):
        evotui.component_versions(small, db=db.parent / "missing.db")
    assert _events(db) == before
    done = evotui.restore(large, f"{name}@{version}", db=db, reason="from Python")
    assert done["by"] == "python" and done["artifact_id"] == next(
        v["artifact_id"] for v in theirs["components"][name]["versions"] if v["version"] == version)
    new = [e for e in _events(db) if e not in before]
    # The restore row, and a rolled_back row for each artifact committed after the restored one.
    assert (large, done["pool_version"], "restore", done["artifact_id"]) in new
    assert all(kind == "rolled_back" for _, _, kind, _ in new if kind != "restore") and len(new) >= 1
