"""`evotui replay` of a prompt task's candidate (rules, simulated): each reply is parsed as the
propose stage parses it and scored on the validation examples by the task model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of


def test_replay_of_a_prompt_candidate(tmp_path: Path) -> None:
    db = tmp_path / "rules.db"
    # Mode sync: the same candidate and stored request on every machine (in the default mode,
    # chain, which step lands first depends on timing, and with it the candidate replayed).
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", "6", "--seed", "4", "--mode", "sync",
                  *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = summary_of(proc)["run_id"]
    with sqlite3.connect(db) as conn:
        cand, = conn.execute("SELECT a.artifact_id FROM artifacts a JOIN lineage l ON l.child_id = a.artifact_id "
                             "AND l.run_id = a.run_id WHERE l.operator = 'mutate' AND a.run_id = ? "
                             "ORDER BY a.val_mean DESC LIMIT 1", (run_id,)).fetchone()
    proc = evotui("replay", run_id, cand, "-n", "2", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout)
    assert res["task_kind"] == "prompt" and res["n"] == 2 and res["candidate_id"] == cand
    for r in res["replies"]:
        assert r["parsed"] and r["evaluated"] and 0.0 <= r["score"] <= 1.0 and r["class"] in ("better", "similar", "worse")
    again = json.loads(evotui("replay", run_id, cand, "-n", "2", "--db", str(db), "--json").stdout)
    assert [r["score"] for r in again["replies"]] == [r["score"] for r in res["replies"]]  # the simulator is seeded
    text = evotui("replay", run_id, cand, "-n", "1", "--variant", "no-history", "--db", str(db))
    assert text.returncode == 0 and "no-history prompt" in text.stdout
    seed = evotui("replay", run_id, "a000000", "-n", "1", "--db", str(db))
    assert seed.returncode == 2 and "seed" in seed.stderr and "Traceback" not in seed.stderr
