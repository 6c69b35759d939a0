"""The built-in agent task (tasks/agent_tools) improves in async mode on the simulated backend,
and its evolution touches several components (read back from the stored artifacts)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of


def test_agent_tools_improves_in_async_mode(db: Path):
    res = evotui("run", "agent_tools", "--no-ui", "--mode", "async", "--db", str(db), "--max-proposals", "30",
                 "--seed", "0", *FAST)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = summary_of(res)
    assert summary["mode"] == "async"
    assert summary["best_score"] >= summary["seed_score"] + 0.3, summary
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT meta_json, components_json FROM artifacts WHERE run_id = ? AND status IN "
                           "('seed', 'confirmed')", (summary["run_id"],)).fetchall()
    finally:
        con.close()
    changed = {name for meta, _ in rows for name in json.loads(meta or "{}").get("changed_components", [])}
    assert len(changed) >= 3, changed
    assert "house" not in changed  # frozen
    frozen = {next(c["text"] for c in json.loads(parts) if c["name"] == "house") for _, parts in rows}
    assert len(frozen) == 1
