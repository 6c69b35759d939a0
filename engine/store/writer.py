"""The single writer task: drains enqueued ops in order, one transaction per batch.

Ordering is what gives crash consistency: ops run in the order they were enqueued and a batch
commits as a whole, so every state on disk is the state after some prefix of the op stream
(minus ops that failed on their own and were reported).

Two kinds of failure:
- an op fails by itself (constraint, bad SQL) while the transaction stays open: SQLite has
  already undone that one statement; it is skipped, reported via on_error and raised from the
  next flush()/close(); the rest of the batch commits.
- the transaction or commit fails (disk full, I/O error, lock timeout): the batch is lost, the
  writer stops, later writes are dropped and counted, and every flush()/close() raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import blobs
from .codec import Param
from .errors import StoreError

ErrorCallback = Callable[[StoreError], None]
_KEEP_ERRORS = 20


@dataclass(frozen=True, slots=True)
class Op:
    name: str  # the Store method that made it, for error messages
    sql: str
    params: tuple[Param, ...]


class _BatchLost(Exception):
    """The whole transaction failed; carries the op count that did not reach the disk."""

    def __init__(self, lost: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.lost = lost
        self.cause = cause


def open_writer_connection(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The writer's own connection (call it on the writer thread). Readers use another one and,
    in WAL mode, only ever see committed batches."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        blobs.register(conn)  # blob inserts compress on this thread, not on the event loop
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class BatchWriter:
    """Use `await BatchWriter.start(path, ...)`; it owns a thread and a connection of its own."""

    def __init__(self, conn: sqlite3.Connection, thread: ThreadPoolExecutor, *, label: str,
                 on_error: ErrorCallback | None, max_batch: int, max_delay_s: float) -> None:
        if max_batch < 1 or max_delay_s < 0:
            raise ValueError("max_batch must be >= 1 and max_delay_s >= 0")
        self._conn = conn
        self._thread = thread
        self._label = label
        self.on_error = on_error
        self._max_batch = max_batch
        self._max_delay_s = max_delay_s
        self._queue: deque[Op] = deque()
        self._times: deque[float] = deque()  # enqueue time of every op not yet written
        self._enqueued = 0
        self._done = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._urgent = asyncio.Event()
        self._closing = False
        self._fatal: StoreError | None = None
        self._dropped = 0
        self._errors: list[StoreError] = []  # first few op failures since the last raise
        self._error_count = 0
        self._task = asyncio.create_task(self._run(), name=f"evotui-store-writer {label}")

    @classmethod
    async def start(cls, path: Path, *, busy_timeout_ms: int, label: str, on_error: ErrorCallback | None,
                    max_batch: int, max_delay_s: float) -> "BatchWriter":
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evotui-store-writer")
        try:
            conn = await asyncio.get_running_loop().run_in_executor(
                thread, open_writer_connection, path, busy_timeout_ms)
        except BaseException:
            thread.shutdown(wait=False)
            raise
        return cls(conn, thread, label=label, on_error=on_error, max_batch=max_batch, max_delay_s=max_delay_s)

    # -- called by Store ---------------------------------------------------------------------

    def put(self, op: Op) -> None:
        if self._fatal is not None:
            # The writer is gone; the loss is counted and reported by flush()/close().
            self._dropped += 1
            return
        self._queue.append(op)
        self._times.append(time.monotonic())
        self._enqueued += 1
        self._wake.set()
        if len(self._queue) >= self._max_batch:
            self._urgent.set()

    @property
    def pending(self) -> int:
        """Ops enqueued but not yet written."""
        return 0 if self._fatal is not None else self._enqueued - self._done

    @property
    def stopped(self) -> bool:
        return self._fatal is not None

    @property
    def lag_s(self) -> float:
        """Age of the oldest op not yet written (0 when none waits)."""
        if self._fatal is not None or not self._times:
            return 0.0
        return time.monotonic() - self._times[0]

    async def catch_up(self) -> None:
        """Wait until everything enqueued so far is written; raises nothing (errors surface at
        the next flush()/close()). Used for backpressure, so producers never outrun the disk."""
        target = self._enqueued
        if self._done < target and self._fatal is None and not self._task.done():
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((target, fut))
            self._urgent.set()
            self._wake.set()
            await fut

    @property
    def written(self) -> int:
        """Ops the writer has finished (committed, or failed on their own and reported)."""
        return self._done

    async def flush(self) -> None:
        await self.catch_up()
        self.raise_pending()

    async def close(self) -> None:
        self._closing = True
        self._urgent.set()
        self._wake.set()
        # asyncio.wait, unlike awaiting the task, does not re-raise the writer's own cancellation.
        await asyncio.wait({self._task})
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._conn.close)
        finally:
            self._thread.shutdown(wait=False)
        self.raise_pending()

    def raise_pending(self) -> None:
        if self._fatal is not None:
            msg = str(self._fatal)
            if self._dropped:
                msg += f"; {self._dropped} writes were not saved"
            raise StoreError(msg) from self._fatal.__cause__
        if self._errors:
            first, count = self._errors[0], self._error_count
            self._errors, self._error_count = [], 0
            extra = f" (and {count - 1} more store errors)" if count > 1 else ""
            raise StoreError(f"{first}{extra}") from first.__cause__

    # -- the task ----------------------------------------------------------------------------

    async def _run(self) -> None:
        batch: list[Op] = []
        try:
            while self._fatal is None:
                if not self._queue:
                    if self._closing:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if len(self._queue) < self._max_batch and not self._urgent.is_set():
                    # Let a few more ops arrive so one commit (one fsync) covers them.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._urgent.wait(), self._max_delay_s)
                self._urgent.clear()
                while self._queue:
                    batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
                    await self._write(batch)
                    self._done += len(batch)
                    for _ in batch:
                        self._times.popleft()
                    batch = []
                    self._resolve_waiters()
        except asyncio.CancelledError:
            self._fail(StoreError(f"{self._label}: the store writer was cancelled with writes unsaved"),
                       lost=len(batch))
            raise
        except _BatchLost as exc:
            err = StoreError(f"{self._label}: a write transaction failed ({exc})")
            err.__cause__ = exc.cause
            self._fail(err, lost=exc.lost)
        except (sqlite3.Error, _Stopped) as exc:
            err = StoreError(f"{self._label}: the store writer stopped ({exc})")
            err.__cause__ = exc
            self._fail(err, lost=len(batch))

    async def _write(self, batch: list[Op]) -> None:
        """The whole batch in one hop to the writer thread: with a busy event loop every hop
        waits a loop turn, so a hop per statement let the writer fall minutes behind."""
        loop = asyncio.get_running_loop()
        failures = await loop.run_in_executor(self._thread, _write_batch, self._conn, batch)
        for op, exc in failures:
            err = StoreError(f"{self._label}: {op.name} failed: {exc}")
            err.__cause__ = exc
            self._report(err)

    # -- bookkeeping -------------------------------------------------------------------------

    def _report(self, err: StoreError) -> None:
        self._error_count += 1
        if len(self._errors) < _KEEP_ERRORS:
            self._errors.append(err)
        if self.on_error is None:
            return
        try:
            self.on_error(err)
        except Exception as cb_exc:  # a broken callback must not kill the writer; still surfaced
            self._error_count += 1
            if len(self._errors) < _KEEP_ERRORS:
                self._errors.append(StoreError(f"{self._label}: on_error callback failed: {cb_exc}"))

    def _fail(self, err: StoreError, *, lost: int) -> None:
        self._fatal = err
        self._dropped += lost + len(self._queue)
        self._queue.clear()
        self._times.clear()
        self._resolve_waiters(everyone=True)
        if self.on_error is not None:
            try:
                self.on_error(err)
            except Exception as cb_exc:  # keep the original failure; note the callback's
                err.add_note(f"on_error callback failed: {cb_exc}")

    def _resolve_waiters(self, *, everyone: bool = False) -> None:
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, fut in self._waiters:
            if everyone or target <= self._done:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still


class _Stopped(Exception):
    """The writer's connection is gone (closed under it)."""


def _write_batch(conn: sqlite3.Connection, batch: list[Op]) -> list[tuple[Op, sqlite3.Error]]:
    """Runs on the writer thread: one transaction for the batch. Returns the ops that failed on
    their own (SQLite undid just that statement); raises _BatchLost if the transaction failed."""
    failures: list[tuple[Op, sqlite3.Error]] = []
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.ProgrammingError as exc:  # closed connection
        raise _Stopped(str(exc)) from exc
    except sqlite3.Error as exc:
        raise _BatchLost(len(batch), exc) from exc
    try:
        for sql, group in itertools.groupby(batch, key=lambda op: op.sql):
            _write_group(conn, sql, list(group), failures)
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        _rollback(conn, exc)
        raise _BatchLost(len(batch), exc) from exc
    except BaseException as exc:
        _rollback(conn, exc)
        raise
    return failures


def _rollback(conn: sqlite3.Connection, original: BaseException) -> None:
    if not conn.in_transaction:
        return  # SQLite already rolled back (e.g. after SQLITE_FULL)
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        # The failure that got us here is what gets reported; this one rides along with it.
        original.add_note(f"rollback also failed: {exc}")


def _write_group(conn: sqlite3.Connection, sql: str, group: list[Op],
                 failures: list[tuple[Op, sqlite3.Error]]) -> None:
    """Consecutive ops with the same SQL go in one executemany."""
    if len(group) == 1:
        _write_one(conn, group[0], failures)
        return
    conn.execute("SAVEPOINT evotui_group")
    try:
        conn.executemany(sql, [op.params for op in group])
    except sqlite3.Error:
        # executemany does not say which row failed: undo the group, replay op by op.
        conn.execute("ROLLBACK TO evotui_group")
        conn.execute("RELEASE evotui_group")
        for op in group:
            _write_one(conn, op, failures)
    else:
        conn.execute("RELEASE evotui_group")


def _write_one(conn: sqlite3.Connection, op: Op, failures: list[tuple[Op, sqlite3.Error]]) -> None:
    try:
        conn.execute(op.sql, op.params)
    except sqlite3.Error as exc:
        if not conn.in_transaction:
            raise  # the statement took the transaction down with it: the batch is lost
        failures.append((op, exc))
