import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--time-scale", "2000", "--quiet"]


def evotui(*args: str, timeout: float = 120, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "evotui.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT, env=full_env
    )


def summary_of(proc: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    assert lines, f"no JSON summary; stderr: {proc.stderr[-2000:]}"
    return json.loads(lines[-1])


def serve_sim(*args: str) -> tuple[subprocess.Popen, str]:
    """`evotui sim-server *args` on a free loopback port, ready: (process, http://127.0.0.1:PORT).
    The caller terminates it; its stderr (the banner) is a pipe."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(port), *args],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, limit_s=60)
    except AssertionError:
        proc.kill()
        raise
    return proc, url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


def wait_live(what: str, proc: subprocess.Popen, ready, timeout: float = 120.0) -> None:
    """Poll `ready()` until it holds while `proc` (a live `evotui run`) is still running; the
    database may not exist yet (OperationalError counts as not ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, (what, proc.communicate())
        try:
            if ready():
                return
        except sqlite3.OperationalError:
            pass  # the database is being created
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_until(predicate, what: str, limit_s: float = 120.0) -> None:
    """Poll `predicate()` until it holds; the limit only turns a hang into a failure."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {limit_s:.0f} s for {what}")
        time.sleep(0.05)


def read_rows(db: Path, sql: str, *args) -> list[tuple]:
    """A query on a database another process may be writing, through a read-only connection."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def wait_healthy(base_url: str, proc: subprocess.Popen, limit_s: float = 120.0) -> None:
    """Wait until `evotui sim-server` at base_url (http://127.0.0.1:PORT) answers /health while
    `proc` runs: one HTTP request per poll, not an evotui process per poll."""
    deadline = time.monotonic() + limit_s
    while True:
        assert proc.poll() is None, ("the sim-server exited", proc.communicate())
        try:
            if httpx.get(f"{base_url}/health", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        if time.monotonic() > deadline:
            raise AssertionError(f"the sim-server at {base_url} did not answer /health within {limit_s:.0f} s")
        time.sleep(0.05)
