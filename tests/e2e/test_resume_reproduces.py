"""A killed-and-resumed simulated run equals the uninterrupted run, artifact for artifact (issue 36).

Mode sync, a fixed seed: one run goes to its budget uninterrupted; a second is SIGKILLed once the
database shows a fixed number of ended items and the next item started, or its proposal stored
(where in that item the kill lands after that depends on the machine's load), and resumed to the same budget. Every artifact (text, parents, scores,
status, version, components, meta without its timings), every item's parent and outcome and every
pool event must then be the same in both databases. What the resume needs for that: the
simulator's replies drawn from a key of (run seed, item, stage, request) rather than arrival order
(engine/llm/draws.py), the minibatch sampler's generator, LoongFlow's island turn and the program
proposer's recent failures kept in the run state.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT
from tests.e2e.test_fault_kills import _cli

CASES = {
    # name: (task, strategy, budget, ended items before the kill, where in the next item it lands)
    "rules-openevolve": ("rules", "openevolve", 16, 7, "proposed"),
    "rules-openevolve-at-start": ("rules", "openevolve", 16, 7, "started"),
    "rules-loongflow": ("rules", "loongflow", 16, 7, "proposed"),
    "rules-gepa": ("rules", "gepa", 16, 7, "proposed"),
    "rules-contextevolve": ("rules", "contextevolve", 16, 7, "proposed"),
    "program-openevolve": ("circle_packing", "openevolve", 8, 3, "proposed"),
    "program-loongflow": ("circle_packing", "loongflow", 8, 3, "proposed"),
    # Migrations every 3 commits, recorded as rows: the resumed run writes the same ones.
    "program-loongflow-migrations": ("circle_packing", "loongflow", 10, 4, "proposed"),
}
SEEDS = {"program-loongflow-migrations": 3}
"""Cases run with another seed than 11 (one that migrates within the budget)."""
CONFIGS = {"program-loongflow-migrations": "[strategy.loongflow]\nmigration_interval = 3\nmigration_threshold = 0.05\n"}
"""Cases run with a --config file of this text."""
TIMINGS = ("eval_s", "started_at", "latency_s", "elapsed_s")


def _untimed(value):
    """Meta without wall-clock figures (an evaluation's seconds differ between any two runs)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _stored(db: Path) -> dict[str, object]:
    con = sqlite3.connect(db)
    try:
        arts = {row[0]: (*row[1:-1], _untimed(json.loads(row[-1])))
                for row in con.execute("SELECT artifact_id, text, parent_ids_json, created_version, val_scores_json, "
                                       "status, components_json, meta_json FROM artifacts")}
        items = con.execute("SELECT item_id, parent_artifact_id, outcome, error FROM items ORDER BY item_id").fetchall()
        events = con.execute("SELECT version, kind, artifact_id FROM pool_events ORDER BY version").fetchall()
        (open_items,) = con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()
        migrations = con.execute("SELECT pool_version, at_commit, from_island, to_island, artifact_ids_json, trigger, "
                                 "from_diversity, to_diversity, threshold, interval FROM migrations "
                                 "ORDER BY at_commit, from_island, to_island").fetchall()
    finally:
        con.close()
    return {"artifacts": arts, "items": items, "events": events, "open": open_items, "migrations": migrations}


def _reached(db: Path, ended: int, where: str) -> bool:
    """`ended` items have ended and (where="proposed") an open item's proposal is stored: the
    resume then takes that item on past its propose stage, without drawing its context again."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        if con.execute("SELECT count(*) FROM items WHERE outcome IS NOT NULL").fetchone()[0] < ended:
            return False
        return where == "started" or con.execute(
            "SELECT count(*) FROM item_stages s JOIN items i USING (run_id, item_id) WHERE i.outcome IS NULL "
            "AND s.stage = 'propose' AND s.outcome = 'forwarded'").fetchone()[0] > 0
    finally:
        con.close()


def _kill_at(cmd: list[str], db: Path, ended: int, where: str) -> None:
    """Run cmd and SIGKILL it as soon as _reached holds; the run must not end first."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:
            assert proc.poll() is None, f"the run ended before its kill: {proc.stderr.read()[-2000:]}"
            try:
                if db.exists() and _reached(db, ended, where):
                    break
            except sqlite3.OperationalError:
                pass  # the schema is being created
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.parametrize("case", list(CASES))
def test_killed_and_resumed_run_equals_the_uninterrupted_one(tmp_path: Path, case: str) -> None:
    task, strategy, budget, kill_at, where = CASES[case]
    args = ["run", task, "--strategy", strategy, "--mode", "sync", "--seed", str(SEEDS.get(case, 11)),
            "--max-proposals", str(budget), "--time-scale", "2000"]
    if case in CONFIGS:
        (tmp_path / "case.toml").write_text(CONFIGS[case])
        args += ["--config", str(tmp_path / "case.toml")]
    whole, killed = tmp_path / "whole.db", tmp_path / "killed.db"
    done = subprocess.run(_cli(whole, *args), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    _kill_at(_cli(killed, *args), killed, kill_at, where)
    before = _stored(killed)
    resumed = subprocess.run(_cli(killed, "resume"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    a, b = _stored(whole), _stored(killed)
    print(f"{case}: killed with {len(before['items'])} items ({before['open']} open), "
          f"{len(a['artifacts'])} artifacts and {len(a['items'])} items in each run at the end, "
          f"{len(before['migrations'])} migrations before the kill, {len(a['migrations'])} at the end")
    assert b["open"] == 0 and len(before["items"]) < len(a["items"])
    differ = sorted(k for k in a["artifacts"].keys() | b["artifacts"].keys()
                    if a["artifacts"].get(k) != b["artifacts"].get(k))
    assert not differ, f"{case}: artifacts that differ after the resume: {differ}"
    assert a["items"] == b["items"]
    assert a["events"] == b["events"]
    assert a["migrations"] == b["migrations"]  # island strategies: recorded once each, across the kill too
    if case in CONFIGS:
        assert a["migrations"]  # the case made some (after the kill: the resumed run wrote them)
