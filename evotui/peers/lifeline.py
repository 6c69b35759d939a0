"""Helper processes end with the process that started them.

The bench starts a simulated server and a peer run per row. A bench killed by a signal Python
cannot unwind from (SIGKILL, or SIGTERM's default action) skips every `with` block, so those
children would live on, holding a port and CPU beside the next bench's measurements. A child
started with `--parent-pid PID` watches its parent instead: when it is reparented (PID is gone),
it says so on stderr, removes its scratch directories (evotui/scratch.py) and exits at once. It
keeps no state worth saving: the server's answers are simulated, and a peer's row is only
printed at its end.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from evotui import scratch

POLL_S = 0.5
ORPHANED_EXIT = 3
"""Exit status of a child whose parent went away (not 0: its work was not done)."""


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The child's side: `--parent-pid PID`."""
    parser.add_argument("--parent-pid", type=int, default=None, metavar="PID",
                        help="exit when process PID is no longer this process's parent (the bench's own children)")


def child_args() -> list[str]:
    """The parent's side: the arguments that make a child started now watch this process."""
    return ["--parent-pid", str(os.getpid())]


def exit_with_parent(parent_pid: int, who: str, poll_s: float = POLL_S) -> threading.Thread:
    """Watch in a daemon thread; exit the process once its parent is no longer `parent_pid`."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        try:
            print(f"{who}: its parent process {parent_pid} is gone; exiting", file=sys.stderr, flush=True)
        except OSError:  # stderr was a pipe to the dead parent: nobody is left to read the notice
            pass
        scratch.remove_all()  # what a `with` block would have removed
        os._exit(ORPHANED_EXIT)  # no unwinding: the main thread may be blocked in a server or a request

    thread = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    thread.start()
    return thread
