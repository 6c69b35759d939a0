"""Taking a run over from a stuck driver: the rule (stale heartbeat and a silent control socket,
on this host), the kill that comes first, the ping, the front end's refusal and takeover, and the
last-ditch bookkeeping a watchdog does when its loop cannot finish the drain."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.run.lease import abandon
from engine.run.runner import SetupError
from engine.store import Store
from engine.store.lease import STUCK_AFTER_S, Lease, _process_start, holder_alive, kill_holder, stuck
from evotui.control import ControlServer, answers, socket_path
from evotui.commands.takeover import clear_stuck_driver

NOW = 1_000_000.0
HOST = socket.gethostname()


def _holder(pid: int = 4242, heartbeat_age: float = 0.0, host: str = HOST, pid_started: str = "77") -> Lease:
    return Lease(run_id="r1", token="t1", pid=pid, host=host, pid_started=pid_started,
                 acquired_at=NOW - 100, heartbeat_at=NOW - heartbeat_age)


def test_a_holder_is_stuck_only_when_its_heartbeat_is_stale_and_it_does_not_answer() -> None:
    stale = STUCK_AFTER_S + 0.5
    assert stuck(_holder(heartbeat_age=stale), NOW, answers_control=False)
    assert not stuck(_holder(heartbeat_age=stale), NOW, answers_control=True)  # slow, not stuck
    assert not stuck(_holder(heartbeat_age=1.0), NOW, answers_control=False)  # no socket, but beating
    assert not stuck(_holder(heartbeat_age=STUCK_AFTER_S), NOW, answers_control=False)  # at the limit
    # Another host's holder cannot be pinged or killed from here; its lease expires by LEASE_TTL_S.
    assert not stuck(_holder(heartbeat_age=stale, host=HOST + "-other"), NOW, answers_control=False)


def _child(code: str) -> subprocess.Popen:
    """A process that prints a line once ready, then sleeps."""
    proc = subprocess.Popen([sys.executable, "-c", f"{code}\nimport sys, time\nprint('ready', flush=True)\n"
                             "time.sleep(600)"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


@pytest.fixture
def children():
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def _lease_of(proc: subprocess.Popen, **changes) -> Lease:
    return replace(_holder(pid=proc.pid, pid_started=_process_start(proc.pid)), **changes)


def test_kill_holder_kills_the_stuck_process_and_it_no_longer_counts_as_alive(children) -> None:
    proc = _child("")
    children.append(proc)
    held = _lease_of(proc)
    assert holder_alive(held)
    assert kill_holder(held) == ""
    assert not holder_alive(held)  # a zombie its parent has not reaped yet drives nothing
    assert proc.wait() in (-signal.SIGTERM, -signal.SIGKILL)


def test_kill_holder_uses_sigkill_on_a_process_that_ignores_sigterm(children) -> None:
    proc = _child("import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    children.append(proc)
    assert kill_holder(_lease_of(proc), wait_s=1.0) == ""
    assert proc.wait() == -signal.SIGKILL


def test_kill_holder_leaves_a_recycled_or_unknown_pid_alone(children) -> None:
    proc = _child("")
    children.append(proc)
    assert kill_holder(_lease_of(proc, pid_started="1")) == ""  # another process now has that pid
    problem = kill_holder(_lease_of(proc, pid_started=""))
    assert f"cannot confirm that pid {proc.pid}" in problem
    assert proc.poll() is None


async def test_answers_tells_a_live_driver_from_a_silent_or_missing_socket(tmp_path: Path) -> None:
    live = ControlServer(None, tmp_path / "live.sock")  # ping needs no run
    assert await live.start()
    silent_path = tmp_path / "silent.sock"
    accepted: list[asyncio.StreamWriter] = []

    async def never_reply(_reader, writer) -> None:  # a wedged driver: the kernel accepts, no one answers
        accepted.append(writer)

    silent = await asyncio.start_unix_server(never_reply, path=str(silent_path))
    try:
        assert await answers(live.path)
        assert not await answers(silent_path, timeout_s=0.5)
        assert not await answers(tmp_path / "missing.sock", timeout_s=0.5)
    finally:
        await live.close()
        for writer in accepted:
            writer.close()
        silent.close()
        await silent.wait_closed()


async def _db_held_by(path: Path, holder: Lease, status: str = "running") -> None:
    store = await Store.open(path, create=True)
    store.insert_run(holder.run_id, task="t", task_path=None, config_json={}, seed=0, mode="async", policy="full",
                     backend="sim", status=status, created_at=1.0)
    await store.flush()
    await store.close()
    con = sqlite3.connect(path)
    con.execute("INSERT INTO leases (run_id, token, pid, host, pid_started, acquired_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (holder.run_id, holder.token, holder.pid, holder.host,
                                                 holder.pid_started, holder.acquired_at, holder.heartbeat_at))
    con.commit()
    con.close()


def _one(path: Path, sql: str):
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


async def test_resume_refuses_a_stuck_driver_naming_it_and_takes_over_only_when_asked(tmp_path: Path,
                                                                                      children) -> None:
    proc = _child("")
    children.append(proc)
    db = tmp_path / "s.db"
    held = replace(_lease_of(proc), heartbeat_at=_lease_of(proc).heartbeat_at - 1e9)  # long stale; no socket
    await _db_held_by(db, held)
    with pytest.raises(SetupError) as refused:
        await clear_stuck_driver(db, None, take_over=False)
    assert f"pid {proc.pid} " in str(refused.value) and "--take-over" in str(refused.value)
    assert proc.poll() is None

    told = await clear_stuck_driver(db, "r1", take_over=True)
    assert f"killed pid {proc.pid}" in told
    assert proc.wait() in (-signal.SIGTERM, -signal.SIGKILL)
    async with _opened(db) as store:  # the dead holder's lease is now free to take
        assert (await store.acquire_lease("r1")).pid == os.getpid()


async def test_a_driver_that_answers_is_not_taken_over(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    me = Lease(run_id="r1", token="t1", pid=os.getpid(), host=HOST, pid_started=_process_start(os.getpid()),
               acquired_at=1.0, heartbeat_at=1.0)  # stale heartbeat, but its loop answers
    await _db_held_by(db, me)
    server = ControlServer(None, socket_path(db, "r1"))
    assert await server.start()
    try:
        assert await clear_stuck_driver(db, "r1", take_over=False) == ""  # resume's lease check refuses
        with pytest.raises(SetupError, match="not stuck .it answers its control socket"):
            await clear_stuck_driver(db, "r1", take_over=True)
    finally:
        await server.close()


class _opened:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def __aenter__(self) -> Store:
        self.store = await Store.open(self.path, create=False)
        return self.store

    async def __aexit__(self, *_) -> None:
        await self.store.close()


async def test_abandon_marks_the_run_interrupted_and_frees_the_lease_only_while_it_is_ours(tmp_path: Path) -> None:
    ours = _holder(pid=os.getpid())
    db = tmp_path / "ab.db"
    await _db_held_by(db, ours)
    assert abandon(db, ours) == ""
    assert _one(db, "SELECT status FROM runs") == [("interrupted",)]
    assert _one(db, "SELECT count(*) FROM leases") == [(0,)]

    taken = tmp_path / "taken.db"  # another process took the run over: its run and lease stay as they are
    await _db_held_by(taken, replace(ours, token="someone-else"))
    assert abandon(taken, ours) == ""
    assert _one(taken, "SELECT status FROM runs") == [("running",)]
    assert _one(taken, "SELECT token FROM leases") == [("someone-else",)]

    ended = tmp_path / "ended.db"  # the run ended on its own while the lease was still held
    await _db_held_by(ended, ours, status="completed")
    assert abandon(ended, ours) == ""
    assert _one(ended, "SELECT status FROM runs") == [("completed",)]
