"""The real `evotui run` in a pseudo-terminal (no tmux needed): pause, review approve, quit."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from evotui.bench.ui import spawn_in_pty


ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78c]")


class Term:
    def __init__(self, argv: list[str], cwd: Path, cols: int = 120, rows: int = 32) -> None:
        self.master, self.proc = spawn_in_pty(argv, (cols, rows), cwd)
        self.raw = b""

    @property
    def text(self) -> str:
        return ANSI.sub(b"", self.raw).decode("utf-8", "replace")

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.raw += os.read(self.master, 65536)
            except OSError:  # EIO: the child closed the terminal
                time.sleep(timeout)

    def wait_for(self, needle: str, timeout: float = 60.0, after: int = 0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = self.text.find(needle, after)
            if found >= 0:
                return found
            self.read(0.1)
        raise AssertionError(f"{needle!r} not on screen within {timeout}s; tail:\n{self.text[-1500:]}")

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        os.close(self.master)



def test_run_in_a_pty_pause_review_quit(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text("[pipeline]\nreview_before_evaluate = true\n")
    argv = [sys.executable, "-m", "evotui.cli", "run", "rules", "--db", str(tmp_path / "r.db"), "--max-proposals", "30",
            "--time-scale", "400", "--config", str(config), "--no-mouse"]
    term = Term(argv, tmp_path)
    try:
        term.wait_for("RUNNING", timeout=60)
        term.send(" ")
        at = term.wait_for("PAUSED")
        term.send(" ")
        term.wait_for("RUNNING", after=at)
        term.send("2")
        term.wait_for("Waiting (")
        at = term.wait_for("i0000", timeout=60)
        term.send("a")
        term.wait_for("Approved i0", after=at)
        term.send("q")
        term.wait_for("Stop the run and quit?")
        term.send("y")
        end = time.monotonic() + 60  # a deadline for a hung TUI, not a speed check
        while term.proc.poll() is None and time.monotonic() < end:
            term.read(0.1)
        term.read(0.2)
        assert term.proc.returncode in (0, 130), term.text[-1500:]
        assert '"status": "interrupted"' in term.text or '"status": "completed"' in term.text
    finally:
        term.close()


def test_every_panel_is_reachable_by_keyboard_at_80x24(tmp_path):
    """The real TUI at 80x24: each dashboard tab, the review queue, the lineage and its diff, the
    key help, reached with keys only."""
    argv = [sys.executable, "-m", "evotui.cli", "run", "rules", "--db", str(tmp_path / "r.db"), "--max-proposals", "400",
            "--time-scale", "400", "--no-mouse"]
    term = Term(argv, tmp_path, cols=80, rows=24)
    try:
        at = term.wait_for("RUNNING", timeout=60)
        at = term.wait_for("Events", after=at)
        term.wait_for("acc ·", after=at)
        term.send(" ")
        at = term.wait_for("PAUSED", after=at)
        for needles in (["Best and mean score", "Proposals per minute"],
                        ["Version gaps", "Queue depth per stage", "Version gap histogram"],
                        ["LLM calls and tokens", "LLM latency percentiles", "endpoint"],
                        ["reserved by"]):
            term.send("]")
            for needle in needles:
                term.wait_for(needle, after=at)
            at = len(term.text)
        term.send("]")
        term.wait_for("Events", after=at)
        at = len(term.text)
        term.send("2")
        term.wait_for("Waiting (", after=at)
        at = len(term.text)
        term.send("3")
        term.wait_for("★ best", after=at)  # the lineage's side panel: the tree has selected the best
        at = len(term.text)
        term.send("\r")
        term.wait_for("esc Back", after=at)  # the full-screen diff's footer (the lineage shows a diff too)
        at = len(term.text)
        term.send("\x1b")
        term.wait_for("Copy id", after=at)  # back on the lineage (a key right after escape reads as alt+key)
        at = len(term.text)
        term.send("1")
        term.wait_for("Overview", after=at)
        at = len(term.text)
        term.send("\x1bOP")  # F1
        term.wait_for("Tabs", after=at)
        term.send("q")
        term.wait_for("Stop the run and quit?")
        term.send("y")
        end = time.monotonic() + 30
        while term.proc.poll() is None and time.monotonic() < end:
            term.read(0.1)
        assert term.proc.returncode in (0, 130), term.text[-1500:]
        assert "Traceback" not in term.text
    finally:
        term.close()


def test_a_driver_exits_cleanly_with_an_attached_tui(tmp_path):
    """`evotui run --no-ui` serving its control socket, `evotui attach` connected to it in a pty:
    the driver ends its run with the client connected, the attached TUI turns read-only and
    quits; neither prints a traceback."""
    db = tmp_path / "r.db"
    driver = subprocess.Popen([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db),
                               "--max-proposals", "40", "--time-scale", "100"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    term = None
    try:
        end = time.monotonic() + 30
        while not list(tmp_path.glob("r.db.*.sock")):
            assert time.monotonic() < end and driver.poll() is None, "the driver never served its socket"
            time.sleep(0.05)
        term = Term([sys.executable, "-m", "evotui.cli", "attach", "--db", str(db), "--no-mouse"], tmp_path,
                    cols=80, rows=24)
        term.wait_for("RUNNING", timeout=60)
        assert "Pause" in term.text, "a controlling attach offers pause"
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, err.decode()[-1500:]
        assert b"Traceback" not in err and b"CancelledError" not in err, err.decode()[-1500:]
        term.wait_for("COMPLETED", timeout=60)
        term.send("q")
        end = time.monotonic() + 60  # a deadline for a hung TUI, not a speed check
        while term.proc.poll() is None and time.monotonic() < end:
            term.read(0.1)
        assert term.proc.returncode == 0 and "Traceback" not in term.text, term.text[-1500:]
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(10)
        if term is not None:
            term.close()
