"""Prompt-task runs on the real local model: every stage on real output, malformed answers
counted and not adopted, usage recorded, and a run that survives a dead server and a SIGKILL.

(A program-task real run is still to come: program tasks are being built separately.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.e2e.conftest import evotui, summary_of
from tests.real.conftest import ROOT, launcher_pids, wait_gone, write_config


def _rows(db, sql, *args):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _wait_calls(db, n, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                if _rows(db, "SELECT count(*) FROM llm_calls")[0][0] >= n:
                    return
            except sqlite3.OperationalError:
                pass  # tables not created yet
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} LLM calls in {timeout}s")


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_run_left_behind():
    """A test that fails mid-way leaves no evotui run (and so no llama.cpp server, which goes with
    its SIGKILLed parent) spending CPU through the rest of the suite."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _popen(*args) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _STARTED.append(proc)
    return proc


def _start(task, cfg, db, *extra):
    return _popen("run", str(task), "--no-ui", "--llm", "local", "--config", str(cfg), "--db", str(db), "--quiet",
                  *extra)


def test_prompt_run_uses_real_output_at_every_stage(mini_task, tmp_path):
    cfg, db, events = write_config(tmp_path / "local.toml"), tmp_path / "run.db", tmp_path / "events.jsonl"
    before = launcher_pids()
    res = evotui("run", str(mini_task), "--no-ui", "--llm", "local", "--config", str(cfg), "--db", str(db),
                 "--max-proposals", "3", "--events", str(events), "--quiet", timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    s = summary_of(res)
    assert s["status"] == "completed" and not s["simulated"] and s["backend"].startswith("local:SmolLM2")
    assert s["proposal_attempts"] == 3
    assert wait_gone(launcher_pids() - before) == set()  # the server stopped with the run

    # Usage was recorded from the real server, per stage.
    by_stage = {st: (n, p, c) for st, n, p, c in _rows(
        db, "SELECT stage, count(*), sum(prompt_tokens), sum(completion_tokens) FROM llm_calls "
            "WHERE status != 'error' GROUP BY stage")}
    for stage in ("rollout", "propose", "evaluate"):
        n, prompt, completion = by_stage[stage]
        assert n > 0 and prompt > 0 and completion > 0, (stage, by_stage)
    assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    assert all(url.startswith("http://127.0.0.1:") for (url,) in _rows(db, "SELECT DISTINCT url FROM llm_calls"))

    # Malformed proposals are counted with their reason and never become artifacts.
    ends = [json.loads(ln) for ln in events.read_text().splitlines() if '"proposal_end"' in ln]
    bad = [e for e in ends if not e["ok"]]
    assert len(ends) == 3 and s["failed"] == len(bad) and s["proposals"] == 3 - len(bad)
    assert all(e["reason"] for e in bad)
    failed_items = {i for (i,) in _rows(db, "SELECT item_id FROM items WHERE outcome = 'failed'")}
    assert len(failed_items) == len(bad)
    adopted = _rows(db, "SELECT artifact_id, status FROM artifacts")
    assert len(adopted) == 1 + s["accepted"]
    assert not {f"a{i[1:]}" for i in failed_items} & {a for a, _ in adopted}


def test_dead_server_stops_the_run_and_sigkill_is_resumable(mini_task, tmp_path):
    cfg, db = write_config(tmp_path / "local.toml"), tmp_path / "run.db"
    before = launcher_pids()

    # 1. The managed server dies mid-run: the run stops cleanly (resumable), nothing is lost.
    proc = _start(mini_task, cfg, db, "--max-proposals", "4")
    _wait_calls(db, 4, proc)
    server = launcher_pids() - before
    assert len(server) == 1
    (server_pid,) = server
    os.kill(server_pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    first = summary_of(subprocess.CompletedProcess([], 130, out, err))
    assert first["status"] == "interrupted" and "evotui resume" in err
    assert first["stop_reason"].startswith(f"local llama.cpp server (pid {server_pid}) exited unexpectedly")
    calls_1 = _rows(db, "SELECT count(*) FROM llm_calls")[0][0]

    # 2. Resume restarts the server; SIGKILL of evotui takes the server down with it (no orphan).
    res_proc = _popen("resume", "--db", str(db), "--no-ui", "--quiet")
    _wait_calls(db, calls_1 + 2, res_proc)
    server = launcher_pids() - before
    assert len(server) == 1
    res_proc.send_signal(signal.SIGKILL)
    res_proc.wait(timeout=20)
    assert wait_gone(server) == set(), "the llama.cpp server outlived a SIGKILLed evotui"
    arts = dict(_rows(db, "SELECT artifact_id, text FROM artifacts"))
    calls_2 = _rows(db, "SELECT count(*) FROM llm_calls")[0][0]

    # 3. Resume again: completes the budget, keeps everything committed, counters continue.
    res = evotui("resume", "--db", str(db), "--no-ui", "--quiet", timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    s = summary_of(res)
    assert s["status"] == "completed" and s["proposal_attempts"] >= 4
    assert all(dict(_rows(db, "SELECT artifact_id, text FROM artifacts")).get(k) == v for k, v in arts.items())
    assert s["llm_calls"] == _rows(db, "SELECT count(*) FROM llm_calls")[0][0] > calls_2
    assert _rows(db, "SELECT count(*) FROM items WHERE outcome IS NULL")[0][0] == 0
    assert _rows(db, "PRAGMA integrity_check")[0][0] == "ok"
    assert wait_gone(launcher_pids() - before) == set()
