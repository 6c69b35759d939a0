"""Safe to leave running: two drivers, a perfect seed, bad scores, a full disk, SIGHUP, a failed
connection and credentials in URLs, each through the CLI as a user meets them."""

from __future__ import annotations

import json
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.costs.resources import data_dir
from tests.e2e.conftest import FAST, ROOT, evotui, free_port, summary_of, wait_healthy

RULES = data_dir("tasks", "engine") / "rules"


def _popen(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "evotui.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _poll(predicate, proc: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    """Wait for predicate(); generous deadline, the assertion is on what happens, not when."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def _rows(db: Path, sql: str) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return []
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def _task_with_metric(tmp_path: Path, body: str, extra_toml: str = "") -> Path:
    task = tmp_path / "task"
    shutil.copytree(RULES, task)
    (task / "metric.py").write_text(f"def score(example, output):\n    {body}\n")
    if extra_toml:
        with (task / "task.toml").open("a") as fh:
            fh.write(extra_toml)
    return task


def test_a_second_driver_is_refused_and_the_budget_holds(db: Path) -> None:
    # A budget the run cannot finish while the second driver starts on a loaded machine: the
    # SIGINT below must find it running (30 proposals were done before it arrived once).
    first = _popen("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--max-proposals", "400",
                   "--time-scale", "20")
    _poll(lambda: _rows(db, "SELECT pid FROM leases"), first)
    second = evotui("resume", "--db", str(db), "--no-ui", "--quiet")
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert "already driven by pid" in second.stderr and "evotui attach" in second.stderr
    first.send_signal(signal.SIGINT)  # drain: a finished run is not needed for the check
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    versions = [v for (v,) in _rows(db, "SELECT version FROM pool_events ORDER BY version")]
    assert versions == list(range(1, len(versions) + 1))
    assert summary_of(subprocess.CompletedProcess([], 0, out, err))["proposal_attempts"] < 400
    assert _rows(db, "SELECT count(*) FROM leases") == [(0,)]  # released at the end


def test_a_perfect_seed_stops_with_no_progress(tmp_path: Path, db: Path) -> None:
    task = _task_with_metric(tmp_path, 'return {"score": 1.0, "feedback": "perfect"}')
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--max-proposals", "20", *FAST, timeout=120)
    assert proc.returncode == 4, proc.stderr
    s = summary_of(proc)
    assert s["status"] == "failed" and "no progress" in s["stop_reason"] and s["proposals"] == 0
    # 30 stalled items x a 3-example minibatch, the seed's validation and what was in flight: bounded.
    assert s["llm_calls"] < 200


def test_a_score_outside_the_declared_range_is_refused(tmp_path: Path, db: Path) -> None:
    task = _task_with_metric(tmp_path, "return 7.0")
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--max-proposals", "3", *FAST)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "metric score returned 7" in proc.stderr and "[metric] range" in proc.stderr
    wide = _task_with_metric(tmp_path / "w", "return 7.0", "range = [0, 10]\n")
    ok = evotui("run", str(wide), "--no-ui", "--db", str(tmp_path / "w.db"), "--max-proposals", "2", *FAST)
    assert ok.returncode == 0, ok.stderr  # inside the declared range: an ordinary run


def test_a_full_disk_interrupts_the_run_and_it_resumes(db: Path) -> None:
    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, 400_000))

    proc = subprocess.run([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db),
                           "--max-proposals", "40", *FAST], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, preexec_fn=small_files)
    assert proc.returncode == 5, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "cannot write the database" in proc.stderr and "evotui resume" in proc.stderr
    assert _rows(db, "SELECT status FROM runs") in ([("interrupted",)], [("running",)])
    shown = evotui("show", "--db", str(db), "--json")
    assert json.loads(shown.stdout)["status"] == "interrupted"  # its driver is gone
    res = evotui("resume", "--db", str(db), "--no-ui", "--quiet", timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert summary_of(res)["status"] == "completed" and summary_of(res)["proposal_attempts"] == 40
    assert _rows(db, "PRAGMA integrity_check") == [("ok",)]


def test_sighup_drains_marks_interrupted_and_removes_the_socket(db: Path) -> None:
    proc = _popen("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", "200", "--time-scale", "40")
    _poll(lambda: _rows(db, "SELECT count(*) FROM artifacts") >= [(2,)], proc)
    run_id = _rows(db, "SELECT run_id FROM runs")[0][0]
    sock = Path(f"{db.resolve()}.{run_id}.sock")
    assert sock.exists()
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert _rows(db, "SELECT status FROM runs") == [("interrupted",)]
    assert not sock.exists()
    assert json.loads(out.strip().splitlines()[-1])["status"] == "interrupted"  # stdout was a pipe


def test_a_failed_connection_leaves_no_database(db: Path) -> None:
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--llm-url", f"http://127.0.0.1:{free_port()}/v1",
                  "--model", "m", "--quiet")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert not db.exists() and not Path(f"{db}-wal").exists()


def test_credentials_in_the_url_are_never_stored_or_printed(tmp_path: Path, db: Path) -> None:
    port = free_port()
    server = _popen("sim-server", "--port", str(port), "--time-scale", "2000")
    try:
        url = f"http://user:Sup3rSecretKey@127.0.0.1:{port}/v1"
        wait_healthy(f"http://127.0.0.1:{port}", server)
        events = tmp_path / "ev.jsonl"
        proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--llm-url", url, "--model", "sim-qwen3-8b",
                      "--max-proposals", "2", "--events", str(events))
        assert proc.returncode == 0, proc.stderr
        blobs = [proc.stdout, proc.stderr, events.read_text()]
        blobs += [Path(f"{db}{s}").read_bytes().decode("latin-1") for s in ("", "-wal") if Path(f"{db}{s}").exists()]
        assert not any("Sup3rSecretKey" in b for b in blobs)
        assert summary_of(proc)["backend"] == f"http://***:***@127.0.0.1:{port}/v1"
        again = evotui("resume", "--db", str(db), "--no-ui", "--max-proposals", "3")
        assert again.returncode == 2 and "--llm-url" in again.stderr
        again = evotui("resume", "--db", str(db), "--no-ui", "--max-proposals", "3", "--llm-url", url, "--quiet")
        assert again.returncode == 0 and summary_of(again)["proposal_attempts"] == 3
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.parametrize("mode", ["async", "chain"])
def test_backpressure_bounds_unsaved_work_at_a_high_time_scale(tmp_path: Path, mode: str) -> None:
    """At time scale 10000 the engine outruns any disk; admission waits for the writer, so the rows
    on disk at a kill trail the process by at most about [store] max_unsaved_rows."""
    db = tmp_path / "fast.db"
    proc = _popen("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--mode", mode, "--max-proposals", "1000",
                  "--time-scale", "10000", "--events", str(tmp_path / "ev.jsonl"))
    _poll(lambda: _rows(db, "SELECT count(*) FROM llm_calls") >= [(1500,)], proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    calls_seen = sum(1 for line in (tmp_path / "ev.jsonl").read_text().splitlines()
                     if '"event": "candidate_selected"' in line)
    items_on_disk = _rows(db, "SELECT count(*) FROM items")[0][0]
    # Events are written as they happen; the database may trail them only by the bounded backlog.
    assert calls_seen - items_on_disk <= 60, (calls_seen, items_on_disk)
