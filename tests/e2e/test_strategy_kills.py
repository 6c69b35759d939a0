"""Kill -9 a loongflow / contextevolve run at random points, resume, repeat: every strategy note a
committed child carries (LoongFlow's plan with its pool version and its summary; ContextEvolve's
summary, guidance with its version, exemplars) survives each kill exactly, the resumed sessions
add notes of the same shape, and the proposal budget ends exact. The kill moments come from a
seeded RNG; the assertions hold for any of them (no timing slack)."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT
from tests.e2e.test_fault_kills import BUDGET, _charged, _cli, _run_with_kill

KILLS = 2


def _notes(db: Path) -> dict[str, dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT artifact_id, meta_json FROM artifacts WHERE status != 'seed'").fetchall()
    finally:
        con.close()
    return {aid: json.loads(meta).get("notes", {}) for aid, meta in rows}


def _shaped(strategy: str, notes: dict) -> bool:
    if strategy == "loongflow":
        planned = ("plan" in notes and notes["plan_version"].isdigit()) or "plan_fallback" in notes
        return planned and ("summary" in notes or "summary_fallback" in notes)
    guided = "guidance" not in notes or notes["guidance_version"].isdigit()
    return guided and notes.get("summary", "").startswith("NEW:")


@pytest.mark.parametrize("strategy", ["loongflow", "contextevolve"])
def test_kills_keep_every_strategy_note(tmp_path: Path, strategy: str) -> None:
    db = tmp_path / "runs.db"
    rng = random.Random(f"strategy-kills-{strategy}")
    cmd = _cli(db, "run", "circle_packing", "--strategy", strategy, "--max-proposals", str(BUDGET),
               "--time-scale", "2000")
    seen: dict[str, dict] = {}
    kills = 0
    while kills < KILLS and _run_with_kill(cmd, db, rng):
        kills += 1
        now = _notes(db)
        assert all(now[aid] == notes for aid, notes in seen.items()), f"kill {kills} changed a stored note"
        seen = now
        cmd = _cli(db, "resume", "--max-proposals", str(BUDGET))
    if kills == KILLS:  # the last session was killed: one more resume finishes the run
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    after = _notes(db)
    print(f"{strategy}: {kills} kills, {len(seen)} children stored at the last kill, {len(after)} at the end")
    assert all(after[aid] == notes for aid, notes in seen.items())
    assert after and all(_shaped(strategy, n) for n in after.values()), after
    assert _charged(db) == (BUDGET, 0)
