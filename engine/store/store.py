"""The run database: synchronous enqueue of writes, one batching writer task, awaited reads.

Write methods never touch the disk: they check and convert their arguments, then enqueue one op
per row. Call them from the event loop thread. A run's insert_run must come before any other write
for that run (child tables reference runs with a foreign key). Each op's SQL and column order
are in statements.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import aiosqlite

from . import blobs, lease, queries, texts
from .codec import dumps, params
from .errors import DamagedDatabase, StoreError, is_damage
from .opening import BUSY_TIMEOUT_MS, connect
from .queries import RunRecord
from .schema import SCHEMA_VERSION
from .statements import (ARTIFACT_COLS, AUDIT_COLS, CALL_COLS, EVAL_COLS, ITEM_COLS, LINEAGE_COLS, MIGRATION_COLS,
                         POOL_COLS, REVIEW_COLS, RUN_INSERT_COLS, SQL, STAGE_COLS, STALE_COLS, STEERING_COLS,
                         UPDATABLE_RUN_COLS)
from .texts import CallTexts
from .writer import BatchWriter, ErrorCallback, Op

__all__ = ["SCHEMA_VERSION", "CallRecordLike", "CallTexts", "RunRecord", "Store", "StoreError",
           "read_only_open"]


class CallRecordLike(Protocol):
    """What insert_llm_call reads (engine.llm.client.CallRecord fits); ttft_s and the texts,
    messages (list of chat messages) and response (str), are optional."""

    endpoint: str
    url: str
    model: str
    stage: str
    status: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    retries: int
    error: str | None
    started_at: float


class Store:
    """Use `await Store.open(...)`; close with `await store.close()` (or `async with`)."""

    def __init__(self, path: Path, conn: aiosqlite.Connection, writer: BatchWriter | None) -> None:
        self.path = path
        self.readonly = writer is None
        self._conn = conn  # reads; writes go through the writer's own connection
        self._lock = asyncio.Lock()
        self._closed = False
        self._writer = writer
        self._texts = blobs.TextKeeper()

    @classmethod
    async def open(cls, path: Path | str, *, create: bool, on_error: ErrorCallback | None = None,
                   readonly: bool = False, max_batch: int = 2000, max_delay_s: float = 0.05) -> Store:
        """create=True makes the file if missing; readonly=True never creates or changes anything.

        on_error(StoreError) is called from the writer task for every failed write.
        """
        if readonly and create:
            raise ValueError("readonly=True cannot create a database")
        path = Path(path).expanduser()
        conn = await connect(path, create=create, readonly=readonly)
        if readonly:
            return cls(path, conn, None)
        try:
            writer = await BatchWriter.start(path, busy_timeout_ms=BUSY_TIMEOUT_MS, label=str(path),
                                             on_error=on_error, max_batch=max_batch, max_delay_s=max_delay_s)
        except sqlite3.Error as exc:
            await conn.close()
            raise StoreError(f"cannot open {path} for writing ({exc}); check its permissions or pass another --db") from exc
        except BaseException:
            await conn.close()
            raise
        return cls(path, conn, writer)

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending_writes(self) -> int:
        """Ops enqueued and not yet written (0 for a read-only store)."""
        return 0 if self._writer is None else self._writer.pending

    @property
    def lag_s(self) -> float:
        """Age in seconds of the oldest write not yet on disk (0 when none waits)."""
        return 0.0 if self._writer is None else self._writer.lag_s

    @property
    def on_error(self) -> ErrorCallback | None:
        """Called from the writer task for every failed write (see BatchWriter)."""
        return None if self._writer is None else self._writer.on_error

    @on_error.setter
    def on_error(self, callback: ErrorCallback | None) -> None:
        if self._writer is not None:
            self._writer.on_error = callback

    @property
    def failed(self) -> bool:
        """The writer stopped for good (disk full, I/O error): nothing more reaches the disk."""
        return self._writer is not None and self._writer.stopped

    async def catch_up(self) -> None:
        """Wait until every write enqueued so far is on disk (backpressure); raises nothing."""
        if self._writer is not None and not self._closed:
            await self._writer.catch_up()

    @property
    def written_ops(self) -> int:
        """Ops the writer has finished since open (committed, or failed and reported)."""
        return 0 if self._writer is None else self._writer.written

    async def flush(self) -> None:
        """Wait until every op enqueued before this call is committed; raise any writer error."""
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        if self._writer is not None:
            await self._writer.flush()

    async def close(self) -> None:
        """Write what is queued, stop the writer, close the connection. A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None:
                await self._writer.close()
        finally:
            await self._conn.close()

    # -- writes (synchronous enqueue) --------------------------------------------------------

    def _put(self, name: str, columns: tuple[str, ...], values: tuple[Any, ...]) -> None:
        self._put_sql(name, SQL[name], params(columns, values))

    def _put_sql(self, name: str, sql: str, values: tuple[Any, ...]) -> None:
        if self._writer is None:
            raise StoreError(f"{self.path} was opened read-only; {name} is not allowed")
        if self._closed:
            raise StoreError(f"{self.path}: {name} after the store was closed")
        self._writer.put(Op(name, sql, values))

    def insert_run(self, run_id: str, *, task: str, task_path: str | None, config_json: Any,
                   seed: int | None, mode: str | None, policy: str | None, backend: str | None,
                   status: str, created_at: float) -> None:
        """config_json: a dict, a pydantic model or JSON text."""
        config = dumps(config_json, column="config_json")
        self._texts.set_keep(run_id, blobs.keeps_text(json.loads(config) if config else None))
        self._put("insert_run", RUN_INSERT_COLS,
                  (run_id, task, task_path, "{}" if config is None else config, seed, mode, policy,
                   backend, status, created_at, created_at))

    def update_run(self, run_id: str, **cols: Any) -> None:
        """Set runs columns; `*_json` columns take Python values (dict, list, ...)."""
        unknown = sorted(set(cols) - UPDATABLE_RUN_COLS)
        if unknown:
            raise StoreError(f"update_run: unknown column(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(UPDATABLE_RUN_COLS))}")
        if not cols:
            return
        names = tuple(cols)
        values = tuple(dumps(v, column=k) if k.endswith("_json") else v for k, v in cols.items())
        if "config_json" in cols:
            config = values[names.index("config_json")]
            self._texts.set_keep(run_id, blobs.keeps_text(json.loads(config) if config else None))
        sql = f"UPDATE runs SET {', '.join(f'{c} = ?' for c in names)} WHERE run_id = ?"
        self._put_sql("update_run", sql, params((*names, "run_id"), (*values, run_id)))

    def delete_run(self, run_id: str) -> None:
        """Remove a run and every row that belongs to it, then the texts no other run names."""
        self._put("delete_run", ("run_id",), (run_id,))
        self._put_sql("delete_orphan_blobs", blobs.ORPHANS_SQL, ())
        self._texts.forget(run_id)

    def upsert_artifact(self, run_id: str, *, artifact_id: str, text: str, status: str,
                        parent_ids: list[str], created_version: int, val_mean: float | None,
                        val_scores: dict[str, float] | None, minibatch: Any, created_at: float,
                        meta: dict[str, Any] | None, components: Any = None) -> None:
        """Insert, or update every column except created_at (the first insert's time is kept).
        components: a multi-component artifact's parts (JSON); None = the one component `text`
        (an update without them sets None)."""
        self._put("upsert_artifact", ARTIFACT_COLS, (
            run_id, artifact_id, text, status, dumps(list(parent_ids or ()), column="parent_ids"),
            created_version, val_mean, dumps(val_scores, column="val_scores"),
            dumps(minibatch, column="minibatch"), created_at, dumps(meta or {}, column="meta"),
            dumps(components, column="components")))

    def set_artifact_status(self, run_id: str, artifact_id: str, status: str) -> None:
        """Only a stored artifact's status (a restore rolling it back or reinstating it): its
        other columns, its minibatch among them, stay as they are."""
        self._put_sql("set_artifact_status", "UPDATE artifacts SET status = ? WHERE run_id = ? AND artifact_id = ?",
                      (status, run_id, artifact_id))

    def insert_lineage(self, run_id: str, parent_id: str, child_id: str, operator: str,
                       created_at: float) -> None:
        self._put("insert_lineage", LINEAGE_COLS, (run_id, parent_id, child_id, operator, created_at))

    def insert_evaluations(self, run_id: str, artifact_id: str,
                           rows: list[tuple[str, str, float | None, str | None, str | None]],
                           created_at: float) -> None:
        """rows: (example_id, split, score, feedback, stage); one op per row, in order."""
        for row in rows:
            if len(row) != 5:
                raise StoreError(f"insert_evaluations: row {row!r} is not (example_id, split, score, "
                                 "feedback, stage)")
        converted = [params(EVAL_COLS, (run_id, artifact_id, *row, created_at)) for row in rows]
        for values in converted:  # all rows are checked before any is enqueued
            self._put_sql("insert_evaluations", SQL["insert_evaluations"], values)

    def insert_pool_event(self, run_id: str, version: int, kind: str, artifact_id: str | None,
                          detail: dict[str, Any] | None, created_at: float) -> None:
        self._put("insert_pool_event", POOL_COLS,
                  (run_id, version, kind, artifact_id, dumps(detail or {}, column="detail"), created_at))

    def upsert_item(self, run_id: str, *, item_id: str, created_version: int,
                    parent_artifact_id: str | None, stage: str | None, payload: dict[str, Any] | None,
                    outcome: str | None, error: str | None, created_at: float,
                    updated_at: float) -> None:
        """Insert, or update every column except created_at. outcome None = still in the pipeline."""
        self._put("upsert_item", ITEM_COLS, (
            run_id, item_id, created_version, parent_artifact_id, stage,
            dumps(payload or {}, column="payload"), outcome, error, created_at, updated_at))

    def insert_item_stage(self, run_id: str, *, item_id: str, stage: str,
                          version_at_consume: int | None, gap: int | None, enqueued_at: float | None,
                          started_at: float | None, finished_at: float | None,
                          outcome: str | None) -> None:
        self._put("insert_item_stage", STAGE_COLS, (
            run_id, item_id, stage, version_at_consume, gap, enqueued_at, started_at, finished_at,
            outcome))

    def insert_llm_call(self, run_id: str, rec: CallRecordLike, item_id: str | None = None) -> None:
        """One row per CallRecord; rec.started_at becomes created_at. Its messages and response
        go to blobs (each new text once, in the same batch as the row) unless the run keeps no
        text ([store] keep_llm_text = false)."""
        values = params(CALL_COLS, (
            run_id, rec.endpoint, rec.url, rec.model, rec.stage, rec.status, rec.finish_reason,
            rec.prompt_tokens, rec.completion_tokens, rec.latency_s, getattr(rec, "ttft_s", None),
            rec.retries, rec.error, item_id, rec.started_at, getattr(rec, "cached_tokens", 0)))
        n_messages, refs = self._texts.refs(run_id, rec, self._put_blob)
        self._put_sql("insert_llm_call", blobs.call_insert_sql(CALL_COLS, n_messages), (*values, *refs))

    def _put_blob(self, h: bytes, size: int, raw: bytes) -> None:
        self._put_sql("insert_blob", blobs.INSERT_SQL, (h, size, raw))

    def put_judge_labels(self, key: str, *, model: str, labels: list[str], invalid_answers: int,
                         created_at: float) -> None:
        """Cache an edit-type judge's answer (schema v5) under key (a hash of prompt, model, diff)."""
        self._put_sql("put_judge_labels", SQL["put_judge_labels"],
                      (key, model, json.dumps(sorted(labels)), int(invalid_answers), created_at))

    def insert_staleness(self, run_id: str, *, item_id: str, stage: str, policy: str | None,
                         gap: int | None, item_version: int | None, pool_version: int | None,
                         decision: str, reason: str | None, created_at: float, tokens: int = 0,
                         detail: dict | None = None) -> None:
        self._put("insert_staleness", STALE_COLS, (
            run_id, item_id, stage, policy, gap, item_version, pool_version, decision, reason,
            created_at, tokens, dumps(detail, column="detail")))

    def insert_review(self, run_id: str, *, item_id: str, gate: str, decision: str, reason: str | None,
                      edited: bool, created_at: float) -> None:
        """A human review decision (approve / reject / edit / skip) on a held proposal."""
        self._put("insert_review", REVIEW_COLS, (run_id, item_id, gate, decision, reason, int(edited), created_at))

    def insert_audit(self, run_id: str, *, item_id: str, transition: str, component: str | None, decision: str,
                     reason: str | None, detail: dict, created_at: float) -> None:
        """One audited transition of a proposal (schema v6, engine/stages/audit.py)."""
        self._put("insert_audit", AUDIT_COLS, (run_id, item_id, transition, component, decision, reason,
                                                dumps(detail, column="detail"), created_at))

    def insert_steering(self, run_id: str, row: dict[str, Any]) -> None:
        """One steering act (schema v7, engine/steering/persist.py builds the row)."""
        self._put("insert_steering", STEERING_COLS, tuple(row[c] for c in STEERING_COLS))

    def insert_migration(self, run_id: str, row: dict[str, Any]) -> None:
        """One island migration (schema v9, engine/ledger.py builds the row; artifact_ids a list).
        A row already there (same run, at_commit, islands) is kept as it was."""
        values = {**row, "run_id": run_id, "artifact_ids_json": dumps(list(row["artifact_ids"]), column="artifact_ids")}
        self._put("insert_migration", MIGRATION_COLS, tuple(values[c] for c in MIGRATION_COLS))

    # -- reads (committed data only) ---------------------------------------------------------

    def _reader(self) -> aiosqlite.Connection:
        if self._closed:
            raise StoreError(f"{self.path}: read after the store was closed")
        return self._conn

    @contextlib.asynccontextmanager
    async def _reading(self) -> AsyncIterator[None]:
        """Hold the lock for one read; damage met on the way (a page quick_check at open could
        not see, a row whose JSON or text is broken) is a DamagedDatabase, not a traceback."""
        async with self._lock:
            try:
                yield
            except Exception as exc:
                if is_damage(exc):
                    raise DamagedDatabase(self.path, f"{type(exc).__name__}: {exc}") from exc
                raise

    async def list_runs(self) -> list[dict[str, Any]]:
        """Newest first: run_id, task, status, mode, policy, backend, seed, created_at, updated_at,
        pool_version, summary (decoded)."""
        async with self._reading():
            return await queries.list_runs(self._reader())

    async def load_run(self, run_id: str) -> RunRecord | None:
        """Also where a resumed run's [store] keep_llm_text is learnt (from its stored config)."""
        async with self._reading():
            rec = await queries.load_run(self._reader(), run_id)
        if rec is not None:
            self._texts.set_keep(run_id, blobs.keeps_text(rec.config))
        return rec

    def keep_llm_text(self, run_id: str, keep: bool) -> None:
        """Say whether insert_llm_call keeps run_id's texts. insert_run and load_run set it from the
        run's config ([store] keep_llm_text); this overrides it."""
        self._texts.set_keep(run_id, keep)

    async def latest_run_id(self) -> str | None:
        async with self._reading():
            return await queries.latest_run_id(self._reader())

    async def fetch_rows(self, table: str, run_id: str) -> list[dict[str, Any]]:
        """All rows of one table for a run, in write order, JSON decoded, without run_id."""
        async with self._reading():
            return await queries.fetch_rows(self._reader(), table, run_id)

    async def llm_call_texts(self, call_id: int) -> CallTexts | None:
        """The messages and response text of the llm_calls row with rowid call_id (None if none)."""
        async with self._reading():
            return await texts.call_texts(self._reader(), call_id)

    async def iter_llm_calls(self, run_id: str, *, page: int = 256) -> AsyncIterator[dict[str, Any]]:
        """A run's calls in write order, each its llm_calls row plus call_id, messages and
        response (see CallTexts). Read a page at a time, so memory stays bounded; the lock is not
        held between pages (other reads may run while the caller works on one)."""
        if page < 1:
            raise ValueError("page must be >= 1")
        after = 0
        while True:
            async with self._reading():
                rows = await texts.calls_page(self._reader(), run_id, after, page)
            for row in rows:
                yield row
            if len(rows) < page:
                return
            after = rows[-1]["call_id"]

    async def judge_labels(self, keys: list[str]) -> dict[str, list[str]]:
        """Cached judge answers (schema v5) for those keys that have one."""
        out: dict[str, list[str]] = {}
        async with self._reading():
            conn = self._reader()
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = await conn.execute_fetchall(
                    f"SELECT key, labels_json FROM judge_labels WHERE key IN ({', '.join('?' * len(chunk))})", chunk)
                out.update({str(k): list(json.loads(v)) for k, v in rows})
        return out

    async def text_stats(self, run_id: str) -> dict[str, int]:
        """calls, calls_with_text, and the blobs (count, stored bytes, raw bytes) the run's calls name."""
        async with self._reading():
            return await texts.text_stats(self._reader(), run_id)

    # -- the driver lease (direct, not batched: it must be decided before anything is written) -

    async def acquire_lease(self, run_id: str) -> lease.Lease:
        """Take run_id's lease or raise lease.LeaseHeld naming the live holder."""
        if self._writer is None:
            raise StoreError(f"{self.path} was opened read-only; it cannot drive a run")
        async with self._lock:
            return await lease.acquire(self._reader(), run_id, self.path)

    async def renew_lease(self, held: lease.Lease) -> bool:
        """Heartbeat; False when another process has taken the lease over."""
        async with self._lock:
            return await lease.renew(self._reader(), held)

    async def release_lease(self, held: lease.Lease) -> None:
        async with self._lock:
            await lease.release(self._reader(), held)

    async def read_lease(self, run_id: str) -> lease.Lease | None:
        async with self._lock:
            return await lease.read_lease(self._reader(), run_id)

    async def integrity_check(self) -> str:
        """'ok', or SQLite's list of problems joined by newlines."""
        async with self._lock:
            rows = await self._reader().execute_fetchall("PRAGMA integrity_check")
        return "\n".join(str(r[0]) for r in rows)

    async def schema_version(self) -> int:
        async with self._lock:
            rows = list(await self._reader().execute_fetchall("PRAGMA user_version"))
        return int(rows[0][0])


async def read_only_open(path: Path | str) -> Store:
    """For list/show commands: never creates a file, refuses every write."""
    return await Store.open(path, create=False, readonly=True)
