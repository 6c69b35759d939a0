"""Scratch directories of the bench commands, removed even when the process is told to stop.

A `with tempfile.TemporaryDirectory()` block does not run when a signal ends the process
without unwinding: SIGTERM's default action (`kill PID`, `timeout`, a batch scheduler ending a
job) would leave the bench's databases in the machine's temp dir, one set per stopped bench.
The bench commands take theirs from `directory()` instead. `remove_on_sigterm()` makes SIGTERM
remove every live one and then end the process as SIGTERM's default action does (the status a
caller such as `timeout` expects), and a helper process the lifeline ends removes its own first.
Unwinding instead (raising in the main thread) could wait an hour: a peer row runs in a worker
thread that waits for its child process, and asyncio waits for that thread at exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator

_live: set[str] = set()
"""Paths of the scratch directories whose `with` block is running."""


@contextlib.contextmanager
def directory(prefix: str) -> Iterator[str]:
    """A temporary directory (as tempfile.TemporaryDirectory) that `remove_all()` also removes."""
    with tempfile.TemporaryDirectory(prefix=prefix) as path:
        _live.add(path)
        try:
            yield path
        finally:
            _live.discard(path)


def remove_all() -> None:
    """Remove every live scratch directory now (the process is about to end without unwinding)."""
    for path in sorted(_live):
        _live.discard(path)
        # A second pass: a thread still writing (SQLite's) may add a file while the first runs.
        errors: list[tuple[str, BaseException]] = []
        for _ in range(2):
            errors.clear()
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=lambda _func, name, exc: errors.append((name, exc)))
            else:
                shutil.rmtree(path, onerror=lambda _func, name, info: errors.append((name, info[1])))
            if not os.path.lexists(path):
                break
        for name, exc in errors:  # ending anyway: say what is left, so it can be removed by hand
            print(f"evotui: warning: could not remove scratch file {name}: {exc}", file=sys.stderr, flush=True)


def remove_on_sigterm() -> None:
    """From now on, SIGTERM removes the live scratch directories, then ends the process as it
    would have without this handler. Off the main thread (a command run inside a test's worker
    thread) nothing changes: only the main thread can set signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        return

    def on_sigterm(signum: int, _frame) -> None:
        remove_all()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
