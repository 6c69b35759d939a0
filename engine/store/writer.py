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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import aiosqlite

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


class BatchWriter:
    def __init__(self, conn: aiosqlite.Connection, lock: asyncio.Lock, *, label: str,
                 on_error: ErrorCallback | None, max_batch: int, max_delay_s: float) -> None:
        if max_batch < 1 or max_delay_s < 0:
            raise ValueError("max_batch must be >= 1 and max_delay_s >= 0")
        self._conn = conn
        self._lock = lock  # held for a whole batch so readers never see half a batch
        self._label = label
        self._on_error = on_error
        self._max_batch = max_batch
        self._max_delay_s = max_delay_s
        self._queue: deque[Op] = deque()
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

    # -- called by Store ---------------------------------------------------------------------

    def put(self, op: Op) -> None:
        if self._fatal is not None:
            # The writer is gone; the loss is counted and reported by flush()/close().
            self._dropped += 1
            return
        self._queue.append(op)
        self._enqueued += 1
        self._wake.set()
        if len(self._queue) >= self._max_batch:
            self._urgent.set()

    @property
    def pending(self) -> int:
        """Ops enqueued but not yet written."""
        return 0 if self._fatal is not None else self._enqueued - self._done

    @property
    def written(self) -> int:
        """Ops the writer has finished (committed, or failed on their own and reported)."""
        return self._done

    async def flush(self) -> None:
        target = self._enqueued
        if self._done < target and self._fatal is None and not self._task.done():
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((target, fut))
            self._urgent.set()
            self._wake.set()
            await fut
        self.raise_pending()

    async def close(self) -> None:
        self._closing = True
        self._urgent.set()
        self._wake.set()
        # asyncio.wait, unlike awaiting the task, does not re-raise the writer's own cancellation.
        await asyncio.wait({self._task})
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
                    async with self._lock:
                        await self._write(batch)
                    self._done += len(batch)
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
        except (sqlite3.Error, ValueError) as exc:
            # aiosqlite raises ValueError once its connection is gone.
            err = StoreError(f"{self._label}: the store writer stopped ({exc})")
            err.__cause__ = exc
            self._fail(err, lost=len(batch))

    async def _write(self, batch: list[Op]) -> None:
        conn = self._conn
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, group in itertools.groupby(batch, key=lambda op: op.sql):
                await self._write_group(sql, list(group))
            await conn.execute("COMMIT")
        except sqlite3.Error as exc:
            await self._rollback(exc)
            raise _BatchLost(len(batch), exc) from exc
        except BaseException as exc:  # cancellation: undo the batch, then let it propagate
            await self._rollback(exc)
            raise

    async def _rollback(self, original: BaseException) -> None:
        if not self._conn.in_transaction:
            return  # SQLite already rolled back (e.g. after SQLITE_FULL)
        try:
            await self._conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            # The failure that got us here is what gets reported; this one rides along with it.
            original.add_note(f"rollback also failed: {exc}")

    async def _write_group(self, sql: str, group: list[Op]) -> None:
        """Consecutive ops with the same SQL go in one executemany (one thread hop, not N)."""
        if len(group) == 1:
            await self._write_one(group[0])
            return
        conn = self._conn
        await conn.execute("SAVEPOINT evotui_group")
        try:
            await conn.executemany(sql, [op.params for op in group])
        except sqlite3.Error:
            # executemany does not say which row failed: undo the group, replay op by op.
            await conn.execute("ROLLBACK TO evotui_group")
            await conn.execute("RELEASE evotui_group")
            for op in group:
                await self._write_one(op)
        else:
            await conn.execute("RELEASE evotui_group")

    async def _write_one(self, op: Op) -> None:
        try:
            await self._conn.execute(op.sql, op.params)
        except sqlite3.Error as exc:
            if not self._conn.in_transaction:
                raise  # the statement took the transaction down with it: the batch is lost
            err = StoreError(f"{self._label}: {op.name} failed: {exc}")
            err.__cause__ = exc
            self._report(err)

    # -- bookkeeping -------------------------------------------------------------------------

    def _report(self, err: StoreError) -> None:
        self._error_count += 1
        if len(self._errors) < _KEEP_ERRORS:
            self._errors.append(err)
        if self._on_error is None:
            return
        try:
            self._on_error(err)
        except Exception as cb_exc:  # a broken callback must not kill the writer; still surfaced
            self._error_count += 1
            if len(self._errors) < _KEEP_ERRORS:
                self._errors.append(StoreError(f"{self._label}: on_error callback failed: {cb_exc}"))

    def _fail(self, err: StoreError, *, lost: int) -> None:
        self._fatal = err
        self._dropped += lost + len(self._queue)
        self._queue.clear()
        self._resolve_waiters(everyone=True)
        if self._on_error is not None:
            try:
                self._on_error(err)
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
