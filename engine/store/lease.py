"""One driver per run: a lease row (owner pid, host, process start time, heartbeat) in the run's
database, taken atomically before a process drives a run and released when it stops.

A second `run`/`resume`/API driver is refused while the holder is alive. The holder counts as
alive when it is on this host and its pid still runs the same process (start time checked, so a
recycled pid is not mistaken for it), or, on another host (a shared filesystem), while its
heartbeat is fresher than LEASE_TTL_S. A lease whose owner is dead is taken over.

A holder on this host that lives but is stuck (its heartbeat older than STUCK_AFTER_S and its
control socket silent) is taken over only when the user asks (`evotui resume --take-over`): the
holder is killed first, so two processes never write one run.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from .errors import StoreError
from .opening import immediate

LEASE_TTL_S = 30.0
"""A holder on another host whose heartbeat is older than this is presumed dead."""
HEARTBEAT_S = 5.0
STUCK_AFTER_S = 3 * HEARTBEAT_S
"""A live holder on this host that has missed this many seconds of heartbeats may be stuck."""
SIGKILL_WAIT_S = 10.0
"""A process that outlives SIGKILL this long is in uninterruptible I/O; takeover gives up."""


@dataclass(frozen=True)
class Lease:
    run_id: str
    token: str
    pid: int
    host: str
    pid_started: str
    acquired_at: float
    heartbeat_at: float

    def describe(self, now: float | None = None) -> str:
        age = (now or time.time()) - self.heartbeat_at
        return f"pid {self.pid} on {self.host} (heartbeat {age:.0f} s ago)"


class LeaseHeld(StoreError):
    """Another live process drives the run; the message says which and what to do."""

    def __init__(self, message: str, holder: Lease) -> None:
        super().__init__(message)
        self.holder = holder


def _proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat from field 3 (the state) on; [] where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may contain spaces and parentheses; fields resume after the last ')'.
    return stat.rsplit(")", 1)[-1].split()


def _process_start(pid: int) -> str:
    """The kernel's start time of pid (clock ticks since boot), '' where /proc cannot tell."""
    fields = _proc_stat(pid)
    return fields[19] if len(fields) > 19 else ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    # A zombie has exited (its parent has not reaped it yet): it drives nothing.
    return _proc_stat(pid)[:1] != ["Z"]


def holder_alive(lease: Lease, now: float | None = None) -> bool:
    if lease.host == socket.gethostname():
        if not _pid_alive(lease.pid):
            return False
        started = _process_start(lease.pid)
        return not (started and lease.pid_started and started != lease.pid_started)
    return (now or time.time()) - lease.heartbeat_at < LEASE_TTL_S


def stuck(holder: Lease, now: float, answers_control: bool) -> bool:
    """The takeover rule: a holder on this host whose process lives but whose heartbeat is older
    than STUCK_AFTER_S and who does not answer its control socket is stuck (a wedged loop, a
    stopped job). A fresh heartbeat or an answer means it works, however slowly."""
    return (holder.host == socket.gethostname() and now - holder.heartbeat_at > STUCK_AFTER_S
            and not answers_control)


def kill_holder(holder: Lease, wait_s: float = 3.0) -> str:
    """Kill a stuck holder on this host (SIGTERM, wait_s for it to go, then SIGKILL): the stuck
    process must not wake up and write a run another process now drives. Returns '' once it is
    gone, else the problem."""
    started = _process_start(holder.pid)
    if not holder.pid_started or not started:
        return f"cannot confirm that pid {holder.pid} is the run's driver (no start time); stop it yourself"
    if started != holder.pid_started:
        return ""  # that process has gone; the pid now names another one, left alone
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, SIGKILL_WAIT_S)):
        try:
            os.kill(holder.pid, sig)
        except ProcessLookupError:
            return ""
        except PermissionError:
            return f"pid {holder.pid} belongs to another user; it cannot be stopped from here"
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not holder_alive(holder):
                return ""
            time.sleep(0.05)
    return f"pid {holder.pid} did not exit after SIGKILL"


def _row_to_lease(row) -> Lease:
    return Lease(run_id=row[0], token=row[1], pid=int(row[2]), host=row[3], pid_started=row[4] or "",
                 acquired_at=float(row[5]), heartbeat_at=float(row[6]))


_SELECT = ("SELECT run_id, token, pid, host, pid_started, acquired_at, heartbeat_at "
           "FROM leases WHERE run_id = ?")


async def read_lease(conn: aiosqlite.Connection, run_id: str) -> Lease | None:
    rows = list(await conn.execute_fetchall(_SELECT, (run_id,)))
    return _row_to_lease(rows[0]) if rows else None


async def acquire(conn: aiosqlite.Connection, run_id: str, db_path: Path) -> Lease:
    """Take the run's lease in one write transaction, or raise LeaseHeld naming the holder."""
    now = time.time()
    pid = os.getpid()
    mine = Lease(run_id=run_id, token=uuid.uuid4().hex, pid=pid, host=socket.gethostname(),
                 pid_started=_process_start(pid), acquired_at=now, heartbeat_at=now)
    try:
        async with immediate(conn):
            rows = list(await conn.execute_fetchall(_SELECT, (run_id,)))
            if rows:
                holder = _row_to_lease(rows[0])
                if holder_alive(holder, now):
                    raise LeaseHeld(
                        f"run {run_id} is already driven by {holder.describe(now)}; watch or steer it with "
                        f"`evotui attach {run_id} --db {db_path}`, or stop that process first", holder)
            await conn.execute(
                "INSERT OR REPLACE INTO leases (run_id, token, pid, host, pid_started, acquired_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (mine.run_id, mine.token, mine.pid, mine.host, mine.pid_started, mine.acquired_at, mine.heartbeat_at))
    except sqlite3.Error as exc:
        raise StoreError(f"{db_path}: cannot take the lease of run {run_id} ({exc}); check that the "
                         "file is writable and not on a filesystem without locking") from exc
    return mine


async def renew(conn: aiosqlite.Connection, lease: Lease) -> bool:
    """Refresh the heartbeat; False if the lease is no longer ours (taken over)."""
    cur = await conn.execute("UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND token = ?",
                             (time.time(), lease.run_id, lease.token))
    return cur.rowcount == 1


async def release(conn: aiosqlite.Connection, lease: Lease) -> None:
    await conn.execute("DELETE FROM leases WHERE run_id = ? AND token = ?", (lease.run_id, lease.token))
