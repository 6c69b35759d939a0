"""`evotui restore` (offline and through a live driver's control socket) and `evotui branch`,
through the CLI on the simulated backend: the audit rows, `show`, each refusal, kill -9 + resume."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from evotui.control import socket_path
from tests.e2e.conftest import FAST, ROOT, evotui, summary_of, wait_live, read_rows

TIMEOUT = 120.0


def _finished_run(db: Path, proposals: int = 10) -> dict:
    res = evotui("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", str(proposals), *FAST)
    assert res.returncode == 0, res.stderr
    return summary_of(res)


def _artifacts(db: Path, run_id: str) -> dict[str, tuple[str, float]]:
    return {a: (s, v) for a, s, v in read_rows(db, "SELECT artifact_id, status, val_mean FROM artifacts WHERE run_id = ?",
                                           run_id)}


def _not_best(db: Path, summary: dict) -> str:
    """A validated artifact other than the active best: the one a restore brings back."""
    arts = _artifacts(db, summary["run_id"])
    return min((a for a, (s, _) in arts.items() if s in ("seed", "confirmed") and a != summary["best_id"]),
               key=lambda a: -arts[a][1])


def _restores(db: Path, run_id: str) -> list[tuple[int, str, dict]]:
    return [(v, a, json.loads(d)) for v, a, d in read_rows(
        db, "SELECT version, artifact_id, detail_json FROM pool_events WHERE run_id = ? AND kind = 'restore' "
            "ORDER BY version", run_id)]


def _show(db: Path, run_id: str) -> tuple[dict, str]:
    js = evotui("show", run_id, "--db", str(db), "--json")
    text = evotui("show", run_id, "--db", str(db))
    assert js.returncode == 0 and text.returncode == 0, js.stderr + text.stderr
    return json.loads(js.stdout), text.stdout


def _expected_best(db: Path, run_id: str, restore_version: int, restored: str) -> str:
    """Pool.best() after a restore, from the rows: the restored artifact unless one added or
    confirmed since is strictly better."""
    arts = _artifacts(db, run_id)
    best = restored
    for (aid,) in read_rows(db, "SELECT artifact_id FROM pool_events WHERE run_id = ? AND version > ? "
                            "ORDER BY version", run_id, restore_version):
        status, score = arts[aid]
        if status in ("seed", "confirmed") and score > arts[best][1]:
            best = aid
    return best


def test_restore_offline_then_show_reports_it(db):
    s = _finished_run(db)
    target = _not_best(db, s)
    res = evotui("restore", s["run_id"], target, "--reason", "shorter prompt", "--db", str(db))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1
    assert f"active best is now {target}" in res.stdout and f"was {s['best_id']}" in res.stdout
    assert f"pool version {s['pool_version'] + 1}" in res.stdout

    [(version, aid, detail)] = _restores(db, s["run_id"])
    assert (version, aid) == (s["pool_version"] + 1, target)
    assert detail == {"restore": True, "reason": "shorter prompt", "previous_best": s["best_id"], "by": "cli"}
    info, text = _show(db, s["run_id"])
    assert info["best_id"] == target and info["status"] == "completed"  # the run keeps its status
    assert (info["summary"]["best_id"], info["summary"]["pool_version"]) == (target, s["pool_version"] + 1)
    assert [r["by"] for r in info["restores"]] == ["cli"]
    [line] = [ln for ln in text.splitlines() if ln.startswith("restore ")]
    assert f"by cli: {target} (was {s['best_id']}): shorter prompt" in line


def test_restore_refusals_write_nothing(db, tmp_path):
    s = _finished_run(db, proposals=4)
    other = _finished_run(db, proposals=12)  # artifact ids count per run: it has ids s lacks
    arts = _artifacts(db, s["run_id"])
    only_in_other = next(a for a in _artifacts(db, other["run_id"]) if a not in arts)
    con = sqlite3.connect(db)
    # A speculative artifact that left the pool and an imported run (states a run reaches in
    # speculation and `evotui import`), written directly to keep this test short.
    removed = _not_best(db, s)
    con.execute("UPDATE artifacts SET status = 'removed' WHERE run_id = ? AND artifact_id = ?", (s["run_id"], removed))
    con.execute("UPDATE runs SET status = 'imported' WHERE run_id = ?", (other["run_id"],))
    con.commit()
    con.close()
    before = read_rows(db, "SELECT run_id, version FROM pool_events ORDER BY run_id, version")

    cases = {
        "no run 'nope'": ("nope", "a000000"),
        "has no artifact 'zz'": (s["run_id"], "zz"),
        f"belongs to run {other['run_id']}": (s["run_id"], only_in_other),
        f"artifact {removed} is removed": (s["run_id"], removed),
        "imported": (other["run_id"], "a000000"),
    }
    for message, (run_id, artifact) in cases.items():
        res = evotui("restore", run_id, artifact, "--db", str(db))
        assert res.returncode == 2, (message, res.stderr)
        assert message in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    missing = evotui("restore", s["run_id"], "a000000", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no database" in missing.stderr
    assert read_rows(db, "SELECT run_id, version FROM pool_events ORDER BY run_id, version") == before


def _start_live(db: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db), "--quiet", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _live_run_with_two_artifacts(db: Path) -> tuple[subprocess.Popen, str, str]:
    """A slow live run (its budget far away) that has committed something beyond the seed."""
    proc = _start_live(db, "--max-proposals", "400", "--time-scale", "40")
    wait_live("the run row", proc, lambda: bool(read_rows(db, "SELECT run_id FROM runs")) if db.exists() else False)
    run_id = read_rows(db, "SELECT run_id FROM runs")[0][0]
    wait_live("the control socket", proc, socket_path(db, run_id).exists)
    wait_live("a committed artifact", proc,
          lambda: len([a for a, (st, _) in _artifacts(db, run_id).items() if st == "confirmed"]) >= 1)
    return proc, run_id, "a000000"


def test_restore_live_through_the_control_socket(db):
    proc, run_id, seed = _live_run_with_two_artifacts(db)
    try:
        res = evotui("restore", run_id, seed, "--reason", "back to the seed", "--db", str(db))
        assert res.returncode == 0, res.stderr
        assert f"active best is now {seed}" in res.stdout
        stop = evotui("restore", run_id, "zz", "--db", str(db))
        assert stop.returncode == 2 and "has no artifact 'zz'" in stop.stderr
    finally:
        proc.send_signal(signal.SIGINT)  # drain: finish in-flight work, then the summary
        out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err  # drained on the signal, resumable
    summary = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    [(version, aid, detail)] = _restores(db, run_id)
    assert aid == seed and detail["by"] == "control" and detail["reason"] == "back to the seed"
    assert summary["best_id"] == _expected_best(db, run_id, version, seed)
    info, text = _show(db, run_id)
    assert info["best_id"] == summary["best_id"]
    assert "by control: a000000" in text


def test_live_restore_survives_kill_and_resume(db):
    proc, run_id, seed = _live_run_with_two_artifacts(db)
    try:
        res = evotui("restore", run_id, seed, "--db", str(db))
        assert res.returncode == 0, res.stderr
        wait_live("the restore row", proc, lambda: bool(_restores(db, run_id)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    [(version, _, _)] = _restores(db, run_id)
    at_kill = _expected_best(db, run_id, version, seed)
    info, _ = _show(db, run_id)
    assert info["status"] == "interrupted" and info["best_id"] == at_kill

    # The stored time scale (40) stays; a budget a few proposals past the kill keeps this short.
    res = evotui("resume", run_id, "--db", str(db), "--no-ui", "--quiet", "--max-proposals", "8")
    assert res.returncode == 0, res.stderr
    assert [v for v, _, _ in _restores(db, run_id)] == [version]  # kept, not replayed or lost
    assert summary_of(res)["best_id"] == _expected_best(db, run_id, version, seed)


def test_branch_starts_a_linked_run_from_an_artifact(db):
    s = _finished_run(db)
    source = _not_best(db, s)
    res = evotui("branch", s["run_id"], source, "--db", str(db), "--no-ui", "--max-proposals", "4", *FAST)
    assert res.returncode == 0, res.stderr
    b = summary_of(res)
    assert b["run_id"] != s["run_id"] and b["status"] == "completed" and b["task"] == s["task"]
    [(text, meta)] = read_rows(db, "SELECT text, meta_json FROM artifacts WHERE run_id = ? AND status = 'seed'", b["run_id"])
    [(original,)] = read_rows(db, "SELECT text FROM artifacts WHERE run_id = ? AND artifact_id = ?", s["run_id"], source)
    assert text == original
    assert json.loads(meta)["branched_from"] == {"run_id": s["run_id"], "artifact_id": source}
    info, shown = _show(db, b["run_id"])
    assert info["branched_from"] == {"run_id": s["run_id"], "artifact_id": source}
    assert f"branched from  run {s['run_id']} artifact {source}" in shown
    # The stored config carried over: the source's mode and strategy, the branch's own budget.
    [(cfg,)] = read_rows(db, "SELECT config_json FROM runs WHERE run_id = ?", b["run_id"])
    assert json.loads(cfg)["budget"]["max_proposals"] == 4

    bad = evotui("branch", s["run_id"], "zz", "--db", str(db), "--no-ui")
    assert bad.returncode == 2 and "has no artifact 'zz'" in bad.stderr and "Traceback" not in bad.stderr
    ui = evotui("branch", s["run_id"], source, "--db", str(db))
    assert ui.returncode == 2 and "--no-ui" in ui.stderr


def test_branch_of_a_program_run_seeds_the_initial_program(db):
    res = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--max-proposals", "4", *FAST)
    assert res.returncode == 0, res.stderr
    s = summary_of(res)
    arts = _artifacts(db, s["run_id"])
    source = next((a for a, (st, _) in sorted(arts.items()) if st == "confirmed"), "a000000")
    b = evotui("branch", s["run_id"], source, "--db", str(db), "--no-ui", "--max-proposals", "2", *FAST)
    assert b.returncode == 0, b.stderr
    new = summary_of(b)["run_id"]
    [(text, meta)] = read_rows(db, "SELECT text, meta_json FROM artifacts WHERE run_id = ? AND status = 'seed'", new)
    assert text == read_rows(db, "SELECT text FROM artifacts WHERE run_id = ? AND artifact_id = ?", s["run_id"], source)[0][0]
    assert json.loads(meta)["branched_from"] == {"run_id": s["run_id"], "artifact_id": source}
