"""A TUI whose terminal stops taking output wedges (Textual's writer blocks, then the UI loop
blocks on its full queue): a hang-up must still end the process within the watchdog's bound, and
a wedged driver must not lock its run (`evotui resume --take-over` kills it and continues).

The TUI runs in a real pseudo-terminal whose master this test stops reading; window-size changes
make it repaint the whole screen, so the pty's buffer fills in seconds. The wedge is confirmed by
the run's heartbeat going stale before the test goes on.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path

from engine.store.lease import HEARTBEAT_S, STUCK_AFTER_S
from evotui.tui.hangup import STOP_GRACE_S
from tests.e2e.conftest import ROOT, evotui, summary_of
from tests.e2e.test_tui_hangup import _rows

GRACE_S = 1.0
"""The drain's grace the TUIs here get (EVOTUI_HANGUP_GRACE_S)."""
MARGIN_S = 30.0
"""The bound is the product's promise (grace + stop grace); the margin absorbs a loaded machine."""
WEDGED_AFTER_S = 2 * HEARTBEAT_S + 2
"""A heartbeat this old means the UI loop is blocked, not merely slow."""


def _heartbeat_age(db: Path) -> float:
    rows = _rows(db, "SELECT heartbeat_at FROM leases")
    return time.time() - rows[0][0] if rows else 0.0


class WedgedTUI:
    """`evotui run rules` on a pty: started, progressing, then wedged on an unread terminal."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: evotui's TUI on the pty
            os.chdir(ROOT)
            os.environ.update(TERM="xterm-256color", COLUMNS="200", LINES="60", EVOTUI_HANGUP_GRACE_S=str(GRACE_S))
            os.execv(sys.executable, [sys.executable, "-m", "evotui.cli", "run", "rules", "--db", str(db),
                                      "--max-proposals", "100000", "--time-scale", "200", "--no-mouse"])

    def wait_progress(self) -> None:
        deadline = time.monotonic() + 120
        while not _rows(self.db, "SELECT count(*) FROM artifacts WHERE status != 'seed'") >= [(1,)]:
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    os.read(self.fd, 65536)  # keep the pty drained so the UI runs freely until now
                except OSError:
                    break
            assert time.monotonic() < deadline, "the TUI run made no progress"

    def wedge(self, heartbeat_older_than: float) -> None:
        """Stop reading the terminal and make the UI repaint until its loop blocks."""
        deadline = time.monotonic() + 120
        n = 0
        while _heartbeat_age(self.db) <= heartbeat_older_than:
            n += 1
            fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 60 + n % 2, 200 + n % 2, 0, 0))
            time.sleep(0.2)
            assert time.monotonic() < deadline, "the TUI never wedged on its unread terminal"
            assert os.waitpid(self.pid, os.WNOHANG) == (0, 0), "the TUI exited before the test hung it up"

    def wait_exit(self, bound_s: float) -> tuple[float, int]:
        """Seconds until the process exited, and its wait status."""
        t0 = time.monotonic()
        while True:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.pid = -1
                return time.monotonic() - t0, status
            assert time.monotonic() - t0 < bound_s, f"the TUI was still running {bound_s:.0f} s later"
            time.sleep(0.05)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.pid > 0:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


def test_a_wedged_tui_exits_within_the_bound_after_a_hangup(tmp_path: Path) -> None:
    db = tmp_path / "hup.db"
    tui = WedgedTUI(db)
    try:
        tui.wait_progress()
        run_id = _rows(db, "SELECT run_id FROM runs")[0][0]
        sock = Path(f"{db.resolve()}.{run_id}.sock")
        tui.wedge(WEDGED_AFTER_S)
        os.kill(tui.pid, signal.SIGHUP)
        took, status = tui.wait_exit(GRACE_S + STOP_GRACE_S + MARGIN_S)
        assert os.waitstatus_to_exitcode(status) == 130
        assert took >= GRACE_S  # the drain had its grace: the exit came from the watchdog, not a crash
        assert _rows(db, "SELECT status FROM runs") == [("interrupted",)]
        assert _rows(db, "SELECT count(*) FROM leases") == [(0,)]
        assert not sock.exists()
    finally:
        tui.close()
    done = evotui("resume", "--no-ui", "--db", str(db), "--max-proposals", "3", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    assert summary_of(done)["status"] == "completed"


def test_resume_refuses_a_stuck_driver_then_takes_it_over_when_asked(tmp_path: Path) -> None:
    db = tmp_path / "stuck.db"
    tui = WedgedTUI(db)
    try:
        tui.wait_progress()
        tui.wedge(STUCK_AFTER_S + 1)
        refused = evotui("resume", "--no-ui", "--db", str(db), "--quiet")
        assert refused.returncode == 2
        assert f"pid {tui.pid} " in refused.stderr and "does not answer its control socket" in refused.stderr
        assert "--take-over" in refused.stderr and "Traceback" not in refused.stderr
        assert os.waitpid(tui.pid, os.WNOHANG) == (0, 0), "a resume without --take-over must leave the driver alone"

        stuck_pid = tui.pid
        taken = evotui("resume", "--no-ui", "--db", str(db), "--take-over", "--max-proposals", "3", "--quiet")
        assert taken.returncode == 0, taken.stderr[-2000:]
        assert f"killed pid {stuck_pid}" in taken.stderr
        assert summary_of(taken)["status"] == "completed"
        _, status = tui.wait_exit(10)  # already dead: only reaped here
        assert os.WIFSIGNALED(status)
        assert _rows(db, "SELECT count(*) FROM leases") == [(0,)]
    finally:
        tui.close()


def test_a_bad_hangup_grace_is_refused_before_anything_starts(tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    proc = evotui("run", "rules", "--db", str(db), env={"EVOTUI_HANGUP_GRACE_S": "soon"})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "evotui: error: EVOTUI_HANGUP_GRACE_S must be a number of seconds from 0 to 600, got 'soon'; "
        "unset it for the default"]
    assert not db.exists()
