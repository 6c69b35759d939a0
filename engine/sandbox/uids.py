"""Per-evaluation unprivileged uids, for an engine running as root without namespaces.

Each evaluation runs as a uid of its own from a high range that no account uses, so its
RLIMIT_NPROC counts exactly its processes and "every process of this uid" is exactly the
evaluation (a process cannot change its uid back). A uid is leased by binding an abstract unix
socket named after it: the kernel releases the name when the socket closes or the engine dies,
so concurrent evaluations and other evotui runs on the machine never share one.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import stat
import time

UID_BASE = 2_100_000_000
UID_SLOTS = 100_000


class UidLease:
    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        start = random.randrange(UID_SLOTS)
        for k in range(UID_SLOTS):
            uid = UID_BASE + (start + k) % UID_SLOTS
            try:
                self._sock.bind(f"\0evotui-sandbox-uid-{uid}")
            except OSError:
                continue  # held by another evaluation
            self.uid = uid
            return
        self._sock.close()
        raise RuntimeError("no free sandbox uid")

    def close(self) -> None:
        self._sock.close()


def processes_of(uid: int) -> list[int]:
    out, want = [], f"Uid:\t{uid}\t".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                status = fh.read()
            if want in status and b"State:\tZ" not in status:  # zombies are dead already
                out.append(int(name))
        except OSError:
            continue  # exited while we scanned
    return out


def kill_uid(uid: int, timeout: float = 5.0) -> int:
    """SIGKILL every process of uid until none is left (the supervisor normally did it already)."""
    killed, deadline = 0, time.monotonic() + timeout
    while pids := processes_of(uid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                continue
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    return killed


def reachable(path: str, execute: bool = False) -> bool:
    """True when a uid that owns nothing can read (or execute) path: every directory on the way
    is world-searchable, for the path as given and as resolved."""
    for candidate in dict.fromkeys([os.path.abspath(path), os.path.realpath(path)]):
        try:
            st = os.stat(candidate)
        except OSError:
            return False
        if not st.st_mode & (stat.S_IXOTH if execute else stat.S_IROTH):
            return False
        parent = os.path.dirname(candidate)
        while True:
            try:
                if not os.stat(parent).st_mode & stat.S_IXOTH:
                    return False
            except OSError:
                return False
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    return True


def dir_reachable(path: str) -> bool:
    """A directory the uid can enter (scratch root, task folder)."""
    return reachable(path, execute=True) and bool(os.stat(path).st_mode & stat.S_IROTH)
