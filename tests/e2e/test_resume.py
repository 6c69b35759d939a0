"""Kill a run (SIGKILL, SIGINT) and resume it: nothing committed is lost, counters continue."""

import signal
import sqlite3
import subprocess
import sys
import time

from tests.e2e.conftest import ROOT, evotui, summary_of


def _start(db, *extra):
    return subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db), "--quiet", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for_artifacts(db, n, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                count = con.execute("SELECT count(*) FROM artifacts").fetchone()[0]
                con.close()
                if count >= n:
                    return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise AssertionError("run produced no artifacts in time")


def _committed(db):
    con = sqlite3.connect(db)
    arts = dict(con.execute("SELECT artifact_id, text FROM artifacts").fetchall())
    edges = set(con.execute("SELECT parent_id, child_id FROM lineage").fetchall())
    calls = con.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
    con.close()
    return arts, edges, calls


def test_sigkill_then_resume_keeps_every_committed_artifact(db):
    proc = _start(db, "--max-proposals", "30", "--time-scale", "150")
    _wait_for_artifacts(db, 4, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    arts, edges, calls = _committed(db)
    con = sqlite3.connect(db)
    open_items = con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0]
    con.close()
    assert len(arts) >= 4 and open_items > 0

    res = evotui("resume", "--db", str(db), "--no-ui", "--quiet")
    assert res.returncode == 0, res.stderr
    s = summary_of(res)
    assert s["status"] == "completed"
    arts2, edges2, calls2 = _committed(db)
    assert all(arts2.get(k) == v for k, v in arts.items())  # nothing committed lost or rewritten
    assert edges <= edges2
    assert calls2 > calls and s["llm_calls"] == calls2  # counters continue from the committed state
    assert s["proposal_attempts"] <= 30 + open_items  # interrupted items are redone, not double-admitted
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0] == 0
    versions = [v for (v,) in con.execute("SELECT version FROM pool_events ORDER BY version")]
    assert versions == list(range(1, len(versions) + 1))
    con.close()


def test_sigint_drains_then_resume_finishes(db):
    proc = _start(db, "--max-proposals", "40", "--time-scale", "150")
    _wait_for_artifacts(db, 3, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "draining" in err
    s = summary_of(subprocess.CompletedProcess([], 130, out, err))
    assert s["status"] == "interrupted"
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0] == 0  # drained
    con.close()
    res = evotui("resume", s["run_id"], "--db", str(db), "--no-ui", "--quiet")
    assert res.returncode == 0, res.stderr
    s2 = summary_of(res)
    assert s2["status"] == "completed" and s2["proposal_attempts"] == 40


def test_sigusr1_pauses_and_resumes(db):
    proc = _start(db, "--max-proposals", "16", "--time-scale", "300")
    try:
        _wait_for_artifacts(db, 2, proc)
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.5)  # requests already running finish; nothing new starts
        first = _committed(db)[2]
        time.sleep(1.0)
        assert _committed(db)[2] == first  # no LLM call while paused
        assert proc.poll() is None
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=60)
    finally:  # a failure above leaves no paused run behind for the rest of the suite
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "SIGUSR1: paused" in err and "SIGUSR1: running" in err
    assert summary_of(subprocess.CompletedProcess([], 0, out, err))["proposal_attempts"] == 16
