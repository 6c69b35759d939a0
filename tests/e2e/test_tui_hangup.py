"""The TUI in a real pseudo-terminal: when the terminal hangs up (SIGHUP, as an SSH drop or
`tmux kill-session` sends), the run drains, is marked interrupted and removes its socket."""

from __future__ import annotations

import os
import pty
import select
import signal
import sqlite3
import sys
import time
from pathlib import Path

from tests.e2e.conftest import ROOT


def _read_all(fd: int, until: float) -> bytes:
    out = b""
    while time.monotonic() < until:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child side closed
            break
        if not chunk:
            break
        out += chunk
    return out


def _rows(db: Path, sql: str) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.OperationalError:
        return []


def test_a_hangup_drains_the_tui_run_and_marks_it_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "tui.db"
    pid, fd = pty.fork()
    if pid == 0:  # the child: evotui's TUI on the pty
        os.chdir(ROOT)
        os.environ.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
        os.execv(sys.executable, [sys.executable, "-m", "evotui.cli", "run", "rules", "--db", str(db),
                                  "--max-proposals", "200", "--time-scale", "200", "--no-mouse"])
    try:
        deadline = time.monotonic() + 120
        while not _rows(db, "SELECT count(*) FROM artifacts WHERE status != 'seed'") >= [(1,)]:
            _read_all(fd, time.monotonic() + 0.2)  # keep the pty drained so the UI never blocks
            assert time.monotonic() < deadline, "the TUI run made no progress"
        run_id = _rows(db, "SELECT run_id FROM runs")[0][0]
        sock = Path(f"{db.resolve()}.{run_id}.sock")
        assert sock.exists()
        os.kill(pid, signal.SIGHUP)
        os.close(fd)  # the terminal is gone, as after an SSH drop
        fd = -1
        deadline = time.monotonic() + 120
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "the TUI run did not drain after SIGHUP"
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(status) == 130
        assert _rows(db, "SELECT status FROM runs") == [("interrupted",)]
        assert not sock.exists()
        assert _rows(db, "SELECT count(*) FROM leases") == [(0,)]
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass  # already reaped above
