"""The TUI's hang-up watchdog and Textual's writer after a lost terminal, without a terminal:
a fake run, a fake loop, a fake sleep and a recorded exit; a temp database for the bookkeeping."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path

import pytest

import evotui.tui.textual_fixes as textual_fixes
from engine.store import Store
from engine.store.lease import Lease
from evotui.tui.hangup import DEFAULT_GRACE_S, GRACE_ENV, STOP_GRACE_S, HangupWatchdog, grace_from_env
from textual.drivers._writer_thread import MAX_QUEUED_WRITES, WriterThread


class FakeRun:
    def __init__(self, db_path: Path, lease: Lease | None) -> None:
        self.db_path = db_path
        self.lease = lease
        self.stops: list[str] = []

    def stop(self, reason: str) -> None:
        self.stops.append(reason)


class FakeLoop:
    """Runs call_soon_threadsafe callbacks at once, as a live loop would soon after."""

    def __init__(self, closed: bool = False) -> None:
        self.closed = closed

    def call_soon_threadsafe(self, fn, *args) -> None:
        if self.closed:
            raise RuntimeError("Event loop is closed")
        fn(*args)


async def _running_run(tmp_path: Path) -> tuple[Path, Lease]:
    db = tmp_path / "w.db"
    store = await Store.open(db, create=True)
    store.insert_run("r1", task="t", task_path=None, config_json={}, seed=0, mode="async", policy="full",
                     backend="sim", status="running", created_at=1.0)
    await store.flush()
    held = await store.acquire_lease("r1")
    await store.close()
    return db, held


def _status_and_leases(db: Path) -> tuple:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT status FROM runs").fetchone()[0], con.execute("SELECT count(*) FROM leases").fetchone()[0]
    finally:
        con.close()


def _watch(run, socket: Path | None, loop=None, grace_s: float = 0.0) -> tuple[HangupWatchdog, list, list]:
    slept: list[float] = []
    exits: list[int] = []
    dog = HangupWatchdog(run, socket, grace_s, loop or FakeLoop(), sleep=slept.append, exit=exits.append)
    return dog, slept, exits


async def test_a_drain_that_outlasts_its_grace_is_stopped_then_the_process_marks_the_run_and_exits(tmp_path) -> None:
    db, held = await _running_run(tmp_path)
    sock = tmp_path / "w.sock"
    sock.write_text("")
    run = FakeRun(db, held)  # its loop never finishes the stop: the lease is still held
    dog, slept, exits = _watch(run, sock)
    dog.start()
    dog.start()  # a second hang-up signal starts nothing more
    dog.thread.join(timeout=60)
    assert run.stops and "drain outlasted 0 s" in run.stops[0]
    assert slept == [STOP_GRACE_S]
    assert exits == [130]
    assert _status_and_leases(db) == ("interrupted", 0)
    assert not sock.exists()


async def test_a_run_that_ended_is_not_stopped_and_its_own_exit_code_is_kept(tmp_path) -> None:
    db = tmp_path / "none.db"  # the run closed: no lease left, nothing to write
    run = FakeRun(db, None)
    dog, slept, exits = _watch(run, None, grace_s=3600)
    dog.run_ended(0)
    dog.start()
    dog.thread.join(timeout=60)
    assert run.stops == [] and slept == [STOP_GRACE_S] and exits == [0]
    assert not db.exists()


async def test_a_closed_loop_does_not_stop_the_watchdog(tmp_path) -> None:
    db, held = await _running_run(tmp_path)
    dog, _, exits = _watch(FakeRun(db, held), None, loop=FakeLoop(closed=True))
    dog.start()
    dog.thread.join(timeout=60)
    assert exits == [130]
    assert _status_and_leases(db) == ("interrupted", 0)


@pytest.mark.parametrize("raw", ["abc", "-1", "nan", "inf", "601"])
def test_a_bad_grace_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=rf"{GRACE_ENV} must be a number of seconds from 0 to 600, got '{raw}'"):
        grace_from_env({GRACE_ENV: raw})


def test_the_grace_defaults_and_reads_seconds() -> None:
    assert grace_from_env({}) == DEFAULT_GRACE_S
    assert grace_from_env({GRACE_ENV: " "}) == DEFAULT_GRACE_S
    assert grace_from_env({GRACE_ENV: "2.5"}) == 2.5


class DeadTerminal:
    """A terminal that has hung up: every write fails with EIO."""

    def write(self, text: str) -> int:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def flush(self) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    def fileno(self) -> int:
        return -1


def test_textuals_writer_keeps_taking_writes_after_the_terminal_is_lost(monkeypatch) -> None:
    lost: list[str] = []
    monkeypatch.setattr(textual_fixes, "terminal_lost", lambda: lost.append(threading.current_thread().name))
    writer = WriterThread(DeadTerminal())
    writer.start()

    def ui_thread() -> None:  # more writes than the queue holds, then Textual's close
        for i in range(10 * MAX_QUEUED_WRITES):
            writer.write(f"frame {i}")
        writer.stop()

    ui = threading.Thread(target=ui_thread, daemon=True)
    ui.start()
    ui.join(timeout=60)
    assert not ui.is_alive(), "the UI thread blocked on the writer's queue"
    assert lost == ["textual-output"]  # reported once, from the writer thread
