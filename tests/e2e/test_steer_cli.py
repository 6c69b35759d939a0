"""`evotui steer` against a live headless run through its control socket (simulated backend):
guidance and a ban are audited rows, bad input is one line and exit 2, and after kill -9 the
resumed run keeps both (its proposer requests carry the guidance, the banned seed is never a
parent again); `steer status` reads a stopped run's acts from the database."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from engine.store.store import read_only_open
from evotui.control import socket_path
from tests.e2e.conftest import ROOT, evotui, read_rows, summary_of, wait_live

TEXT = "Keep every rule on its own line"


def _start(db: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db), "--quiet",
                             "--mode", "async", "--max-proposals", "400", "--time-scale", "40"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_live("the run row", proc, lambda: db.exists() and bool(read_rows(db, "SELECT run_id FROM runs")))
    run_id = read_rows(db, "SELECT run_id FROM runs")[0][0]
    wait_live("the control socket", proc, socket_path(db, run_id).exists)
    wait_live("a committed artifact", proc, lambda: bool(read_rows(
        db, "SELECT 1 FROM artifacts WHERE run_id = ? AND status = 'confirmed'", run_id)))
    return proc, run_id


def _one_line_error(res: subprocess.CompletedProcess, expected: str) -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert expected in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_steer_a_live_run_then_kill_it_and_resume(db: Path, tmp_path: Path) -> None:
    proc, run_id = _start(db)
    try:
        res = evotui("steer", run_id, "--db", str(db), "guide", TEXT)
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == f"{run_id}: guidance #1 until withdrawn: {TEXT}"
        res = evotui("steer", str(db), "ban", "a000000")  # the database names its running run
        assert res.returncode == 0 and res.stdout.strip() == f"{run_id}: a000000 banned as a parent", res.stderr
        _one_line_error(evotui("steer", run_id, "--db", str(db), "pin", "a000000"), "a000000 is banned; unban it first")
        _one_line_error(evotui("steer", run_id, "--db", str(db), "pin", "zz"), "no candidate 'zz' in this run")
        _one_line_error(evotui("steer", "nope", "--db", str(db), "guide", "x"), "no run 'nope' in")
        _one_line_error(evotui("steer", run_id, "--db", str(tmp_path / "none.db"), "unpin"), "no database at")
        _one_line_error(evotui("steer", run_id, "--db", str(db), "guide", "x", "--for", "0"),
                        "--for must be a whole number from 1")
        status = evotui("steer", run_id, "--db", str(db), "status", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["bans"] == ["a000000"]
        wait_live("a proposal shown the guidance", proc, lambda: bool(read_rows(
            db, "SELECT 1 FROM steering WHERE run_id = ? AND act = 'use'", run_id)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    _one_line_error(evotui("steer", run_id, "--db", str(db), "guide", "x"),
                    f"run {run_id} is interrupted: steering acts on a live run; resume it")
    offline = evotui("steer", run_id, "--db", str(db), "status")
    assert offline.returncode == 0, offline.stderr
    assert f"guidance #1 (until withdrawn, by cli): {TEXT}" in offline.stdout and "banned: a000000" in offline.stdout
    assert "cli: a000000 banned as a parent" in offline.stdout and "acts (2):" in offline.stdout

    [(calls_before,)] = read_rows(db, "SELECT max(rowid) FROM llm_calls WHERE run_id = ?", run_id)
    [(items_before,)] = read_rows(db, "SELECT max(rowid) FROM items WHERE run_id = ?", run_id)
    [(attempts,)] = read_rows(db, "SELECT count(*) FROM items WHERE run_id = ?", run_id)
    res = evotui("resume", run_id, "--db", str(db), "--no-ui", "--quiet", "--max-proposals", str(attempts + 4))
    assert res.returncode == 0, res.stderr
    assert summary_of(res)["status"] == "completed"
    parents = [p for (p,) in read_rows(db, "SELECT parent_artifact_id FROM items WHERE run_id = ? AND rowid > ?",
                                       run_id, items_before)]
    assert parents and "a000000" not in parents  # the ban carried over
    async def propose_texts() -> list[str]:  # the stored request texts of the resumed session
        store = await read_only_open(db)
        try:
            return [c["messages"][-1]["content"] async for c in store.iter_llm_calls(run_id)
                    if c["call_id"] > calls_before and c["stage"] == "propose"]
        finally:
            await store.close()

    texts = asyncio.run(propose_texts())
    assert texts and all("## Guidance from the operator" in t and f"> {TEXT}" in t for t in texts)
