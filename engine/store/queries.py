"""Read queries. Callers hold the store lock, so results never include half a write batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import aiosqlite

from . import lease
from .codec import decode_row
from .errors import StoreError
from .schema import ROW_ORDER

_LIST_COLUMNS = ("run_id, task, status, mode, policy, backend, seed, created_at, updated_at, "
                 "pool_version, summary_json")
_NEWEST_FIRST = "ORDER BY created_at DESC, rowid DESC"


@dataclass
class RunRecord:
    """Everything needed to show or resume a run. JSON columns are decoded and lose `_json`."""

    run_id: str
    task: str
    task_path: str | None
    config: dict[str, Any]
    seed: int | None
    mode: str | None
    policy: str | None
    backend: str | None
    status: str
    created_at: float
    updated_at: float
    rng_state: Any
    counters: dict[str, Any] | None
    pool_version: int
    summary: dict[str, Any] | None
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # by created_version
    lineage: list[dict[str, Any]] = field(default_factory=list)  # in insertion order
    pool_events: list[dict[str, Any]] = field(default_factory=list)  # by version
    open_items: list[dict[str, Any]] = field(default_factory=list)  # outcome NULL, first-seen order
    counts: dict[str, Any] = field(default_factory=dict)


async def _live_status(conn: aiosqlite.Connection, run_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """A run marked running whose driver is gone (kill -9, a full disk, a power cut) reads as
    interrupted: that is what it is, and `evotui resume` continues it."""
    if row.get("status") == "running":
        held = await lease.read_lease(conn, run_id)
        if held is None or not lease.holder_alive(held):
            row["status"] = "interrupted"
    return row


async def list_runs(conn: aiosqlite.Connection) -> list[dict[str, Any]]:
    rows = await conn.execute_fetchall(f"SELECT {_LIST_COLUMNS} FROM runs {_NEWEST_FIRST}")
    return [await _live_status(conn, r["run_id"], decode_row(r, drop=())) for r in rows]


async def latest_run_id(conn: aiosqlite.Connection) -> str | None:
    rows = list(await conn.execute_fetchall(f"SELECT run_id FROM runs {_NEWEST_FIRST} LIMIT 1"))
    return str(rows[0][0]) if rows else None


async def fetch_rows(conn: aiosqlite.Connection, table: str, run_id: str, *,
                     where: str = "", args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    if table not in ROW_ORDER:
        raise StoreError(f"unknown table {table!r}; known: {', '.join(ROW_ORDER)}")
    rows = await conn.execute_fetchall(
        f"SELECT * FROM {table} WHERE run_id = ? {where} ORDER BY {ROW_ORDER[table]}", (run_id, *args))
    decoded = [decode_row(r) for r in rows]
    if table == "runs":
        decoded = [await _live_status(conn, run_id, r) for r in decoded]
    return decoded


async def load_run(conn: aiosqlite.Connection, run_id: str) -> RunRecord | None:
    runs = await fetch_rows(conn, "runs", run_id)
    if not runs:
        return None
    rec = RunRecord(run_id=run_id, **runs[0])
    rec.artifacts = await fetch_rows(conn, "artifacts", run_id)
    rec.lineage = await fetch_rows(conn, "lineage", run_id)
    rec.pool_events = await fetch_rows(conn, "pool_events", run_id)
    rec.open_items = await fetch_rows(conn, "items", run_id, where="AND outcome IS NULL")
    rec.counts = await _counts(conn, run_id)
    return rec


async def _counts(conn: aiosqlite.Connection, run_id: str) -> dict[str, Any]:
    items = {("open" if outcome is None else str(outcome)): n for outcome, n in await conn.execute_fetchall(
        "SELECT outcome, count(*) FROM items WHERE run_id = ? GROUP BY outcome ORDER BY outcome",
        (run_id,))}
    by_status: dict[str, int] = {}
    calls = prompt = completion = 0
    for status, n, p, c in await conn.execute_fetchall(
            "SELECT status, count(*), sum(prompt_tokens), sum(completion_tokens) FROM llm_calls "
            "WHERE run_id = ? GROUP BY status ORDER BY status", (run_id,)):
        by_status[str(status)] = int(n)
        calls += int(n)
        prompt += int(p or 0)
        completion += int(c or 0)
    # Spend is priced from these (engine/costs/spend.py): the same calls, whatever the session counters say.
    groups = [list(row) for row in await conn.execute_fetchall(
        "SELECT endpoint, url, model, stage, count(*), sum(prompt_tokens), sum(completion_tokens), sum(latency_s), "
        "sum(cached_tokens) "
        "FROM llm_calls WHERE run_id = ? GROUP BY endpoint, url, model, stage ORDER BY 1, 2, 3, 4", (run_id,))]
    (evals,), = await conn.execute_fetchall(
        "SELECT count(*) FROM evaluations WHERE run_id = ?", (run_id,))
    # Proposals charged, counted from the rows that record them (the budget's ground truth on resume).
    proposals = {str(kind): int(n) for kind, n in await conn.execute_fetchall(
        "SELECT json_extract(payload_json, '$.proposal') AS kind, count(*) FROM items "
        "WHERE run_id = ? AND kind IS NOT NULL GROUP BY kind", (run_id,))}
    return {
        "items": items,
        "llm_calls": calls,
        "llm_calls_by_status": by_status,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "evaluations": int(evals),
        "proposals": proposals,
        "call_groups": groups,
    }
