"""D1 and D3 in a real terminal: `evotui run` in a pseudo-terminal, busy with a simulated run
(its engine shares the UI's event loop), resized 20 times. After each resize the screen a user
sees (tests/tui/vt.py replays the bytes) must be laid out for the new size: the status line's
form for that width on the first row, the footer ending in the last cell, the event log's
bottom border right above the footer, not marked "scrolled up" (it keeps following).

The harness exports COLUMNS and LINES, as some shells and `script` do: Textual believed them
over the terminal on every SIGWINCH (evotui/tui/textual_fixes.py asks the tty first).
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import termios
import time

from tests.tui.test_pty import Term
from tests.tui.vt import Screen

SIZES = [(160, 48), (80, 24), (100, 30), (120, 36), (90, 26)] * 4
WAIT_S = 30.0
"""How long one resize may take to show on a loaded machine; a broken layout never shows."""


def laid_out(screen: Screen, w: int, h: int) -> str:
    """"" when the screen is right for w x h, else what is wrong."""
    top, bottom = screen.line(0), screen.line(h - 1)
    form = "SIMULATED x400" if w >= 150 else "SIM x400"
    if not top.startswith(" ■ ") or form not in top:
        return f"status line {top.strip()!r}"
    if not bottom.rstrip().endswith("^p palette") or len(bottom.rstrip()) != w:
        return f"footer {bottom.rstrip()[-30:]!r}"
    border = screen.line(h - 2)
    if not (border.startswith("╰") and border.endswith("╯")):
        return f"log bottom border {border[:20]!r}...{border[-10:]!r}"
    if "scrolled up" in border:
        return "the event log stopped following"
    if not any(screen.line(y).startswith("╭─ Events") for y in range(h)):
        return "no event log"
    if not any(screen.line(y).startswith("╭─ Queues") for y in range(h)):
        return "no queues panel"
    return ""


def test_twenty_resizes_under_load_in_a_pty(tmp_path):
    argv = [sys.executable, "-m", "evotui.cli", "run", "rules", "--db", str(tmp_path / "r.db"), "--max-proposals", "5000",
            "--time-scale", "400", "--no-mouse"]
    term = Term(argv, tmp_path, cols=80, rows=24)
    screen = Screen(80, 24)
    fed = 0
    try:
        term.wait_for("RUNNING", timeout=30)
        good = []
        for w, h in SIZES:
            fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", h, w, 0, 0))
            os.killpg(term.proc.pid, signal.SIGWINCH)  # the child has no controlling tty to send it
            screen.resize(w, h)
            fed = len(term.raw)  # what was written before the resize was for the old size
            end = time.monotonic() + WAIT_S
            problem = "nothing drawn"
            while time.monotonic() < end and term.proc.poll() is None:
                term.read(0.1)
                screen.feed(term.raw[fed:].decode("utf-8", "replace"))
                fed = len(term.raw)
                if not (problem := laid_out(screen, w, h)):
                    break
            assert not problem, f"{w}x{h} after {len(good)} good resizes: {problem}\n{screen.text}"
            good.append((w, h))
        assert len(good) == 20
        at = len(term.text)
        term.send("q")
        term.wait_for("Stop the run and quit?", after=at)
        term.send("y")
        end = time.monotonic() + 30
        while term.proc.poll() is None and time.monotonic() < end:
            term.read(0.1)
        assert term.proc.returncode in (0, 130) and "Traceback" not in term.text, term.text[-1500:]
    finally:
        term.close()
