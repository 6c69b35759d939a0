"""A TUI that has lost its terminal exits within a bound, so a hang-up never locks its run.

When the terminal goes (SIGHUP from an SSH drop or `tmux kill-session`, or a failed write), the
run drains as a headless SIGHUP drain does and the app exits. Neither Textual's shutdown nor the
drain is trusted to finish: a watchdog thread gives the drain `grace_s`, then asks the loop to
stop the run at once, and STOP_GRACE_S later, if the process is still here, marks the run
interrupted and releases its lease itself (engine.run.lease.abandon), removes the control socket
and exits with 130. `evotui resume` then continues the run, as after any interruption.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from pathlib import Path
from typing import Callable, Mapping

from engine.run.lease import abandon

GRACE_ENV = "EVOTUI_HANGUP_GRACE_S"
DEFAULT_GRACE_S = 5.0
"""How long the drain may take after a hang-up before the run is stopped at once."""
STOP_GRACE_S = 3.0
"""How long the stop may take before the process marks the run itself and exits."""
MAX_GRACE_S = 600.0
EXIT_INTERRUPTED = 130


def grace_from_env(environ: Mapping[str, str]) -> float:
    """The drain's grace after a hang-up (EVOTUI_HANGUP_GRACE_S); ValueError names a bad value."""
    raw = environ.get(GRACE_ENV, "").strip()
    if not raw:
        return DEFAULT_GRACE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_GRACE_S:
        raise ValueError(f"{GRACE_ENV} must be a number of seconds from 0 to {MAX_GRACE_S:g}, got {raw!r}; "
                         "unset it for the default")
    return value


class HangupWatchdog:
    """Started (once) when the terminal is lost; from then on the process exits within
    grace_s + STOP_GRACE_S. `sleep` and `exit` are replaceable in tests."""

    def __init__(self, run, socket: Path | None, grace_s: float, loop: asyncio.AbstractEventLoop, *,
                 sleep: Callable[[float], None] = time.sleep, exit: Callable[[int], None] = os._exit) -> None:
        self.run = run
        self.socket = socket
        """The control socket this process serves (None if it serves none): removed on a hard exit."""
        self.grace_s = grace_s
        self.loop = loop
        self.exit_code = EXIT_INTERRUPTED
        self._ended = threading.Event()
        self._sleep = sleep
        self._exit = exit
        self._lock = threading.RLock()  # a second SIGHUP may arrive inside the first handler
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Safe from a signal handler and from any thread; later calls do nothing."""
        with self._lock:
            if self.thread is not None:
                return
            self.thread = threading.Thread(target=self._watch, name="evotui-hangup-watchdog", daemon=True)
            self.thread.start()

    def run_ended(self, exit_code: int) -> None:
        """The engine has finished (its status and lease are settled): nothing is left to stop,
        and a hard exit, if the rest of the shutdown hangs, uses the run's own exit code."""
        self.exit_code = exit_code
        self._ended.set()

    def _watch(self) -> None:
        if not self._ended.wait(self.grace_s):
            try:
                self.loop.call_soon_threadsafe(self.run.stop, f"the terminal hung up and the drain outlasted "
                                                              f"{self.grace_s:g} s")
            except RuntimeError:
                pass  # the loop has closed: the process is on its way out; the exit below bounds it
        # After the stop, or after the run's own end: the rest of the shutdown gets this long.
        self._sleep(STOP_GRACE_S)
        self.hard_exit()

    def hard_exit(self) -> None:
        held = self.run.lease
        if held is not None:
            abandon(Path(self.run.db_path), held)  # the terminal is gone: a problem has nowhere to go
        if self.socket is not None:
            self.socket.unlink(missing_ok=True)
        self._exit(self.exit_code)
