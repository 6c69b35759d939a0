"""Reads of the LLM texts kept in blobs (schema v4): one call's, a run's calls page by page, and
how much space they take. Callers hold the store lock (see queries.py)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import aiosqlite

from . import blobs
from .codec import decode_row
from .errors import StoreError

# SQLite's host-parameter limit is 32766 since 3.32; stay far below it.
_IDS_PER_QUERY = 500


@dataclass(frozen=True)
class CallTexts:
    """messages None: not kept (a call recorded before schema v4, or with keep_llm_text off).
    response None: not kept, or the call failed or was cancelled."""

    call_id: int
    messages: list[dict[str, Any]] | None
    response: str | None


def _blob_queries(ids: set[int]) -> Iterator[tuple[str, list[int]]]:
    """The SELECTs (sql, ids) that fetch these blobs, a bounded number of ids each."""
    ordered = sorted(ids)
    for start in range(0, len(ordered), _IDS_PER_QUERY):
        chunk = ordered[start:start + _IDS_PER_QUERY]
        yield f"SELECT id, data FROM blobs WHERE id IN ({', '.join('?' * len(chunk))})", chunk


def _decompressed(rows: Iterable[Any], out: dict[int, bytes]) -> None:
    for blob_id, data in rows:
        out[int(blob_id)] = blobs.decompress(data, blob_id=int(blob_id))


async def _blob_bytes(conn: aiosqlite.Connection, ids: set[int]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for sql, chunk in _blob_queries(ids):
        _decompressed(await conn.execute_fetchall(sql, chunk), out)
    return out


def _texts(row: Any, raw: dict[int, bytes]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """A blob the row names but the table lacks (its insert failed) makes that text None."""
    messages: list[dict[str, Any]] | None = None
    if row["request_blobs_json"] is not None:
        ids = json.loads(row["request_blobs_json"])
        if all(isinstance(i, int) and i in raw for i in ids):
            messages = [blobs.decode_message(raw[i]) for i in ids]
    response_id = row["response_blob"]
    response = blobs.decode_text(raw[response_id]) if response_id in raw else None
    return messages, response


async def call_texts(conn: aiosqlite.Connection, call_id: int) -> CallTexts | None:
    """None when there is no llm_calls row with that rowid."""
    rows = list(await conn.execute_fetchall(
        "SELECT request_blobs_json, response_blob FROM llm_calls WHERE rowid = ?", (call_id,)))
    if not rows:
        return None
    raw = await _blob_bytes(conn, blobs.ids_in(rows))
    messages, response = _texts(rows[0], raw)
    return CallTexts(call_id, messages, response)


async def calls_page(conn: aiosqlite.Connection, run_id: str, after: int, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` of the run's calls with rowid > after, in write order: the llm_calls row
    (as fetch_rows gives it) plus call_id, messages and response (see CallTexts)."""
    rows = list(await conn.execute_fetchall(
        "SELECT rowid AS call_id, * FROM llm_calls WHERE run_id = ? AND rowid > ? ORDER BY rowid LIMIT ?",
        (run_id, after, limit)))
    raw = await _blob_bytes(conn, blobs.ids_in(rows))
    out = []
    for row in rows:
        call = decode_row(row)
        call["messages"], call["response"] = _texts(row, raw)
        out.append(call)
    return out


async def text_stats(conn: aiosqlite.Connection, run_id: str) -> dict[str, int]:
    """calls / calls_with_text of the run; blobs, blob_bytes (stored, compressed) and raw_bytes of
    the blobs its calls name (shared with other runs' calls, in the same database, too)."""
    (calls, with_text), = await conn.execute_fetchall(
        "SELECT count(*), count(request_blobs_json) FROM llm_calls WHERE run_id = ?", (run_id,))
    (n, stored, raw), = await conn.execute_fetchall(
        """SELECT count(*), coalesce(sum(length(data)), 0), coalesce(sum(size), 0) FROM blobs WHERE id IN (
               SELECT response_blob FROM llm_calls WHERE run_id = ?1
               UNION SELECT j.value FROM llm_calls, json_each(llm_calls.request_blobs_json) AS j
               WHERE llm_calls.run_id = ?1 AND llm_calls.request_blobs_json IS NOT NULL)""", (run_id,))
    return {"calls": int(calls), "calls_with_text": int(with_text), "blobs": int(n),
            "blob_bytes": int(stored), "raw_bytes": int(raw)}


def recorded_replies(db: Path) -> list[tuple[list[dict[str, Any]], str, int, int, str]]:
    """Every completed call of every run in `db` whose texts were kept: (messages, reply, prompt
    tokens, completion tokens, finish reason), in recording order. Read-only, synchronous (the
    simulator loads them once at start: engine/llm/sim/replay.py). StoreError: not readable."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"{db}: cannot open ({exc})") from None
    try:
        con.row_factory = sqlite3.Row
        rows = con.execute(
            "SELECT request_blobs_json, response_blob, prompt_tokens, completion_tokens, finish_reason "
            "FROM llm_calls WHERE response_blob IS NOT NULL ORDER BY rowid").fetchall()
        raw: dict[int, bytes] = {}
        for sql, chunk in _blob_queries(blobs.ids_in(rows)):
            _decompressed(con.execute(sql, chunk), raw)
    except sqlite3.Error as exc:
        raise StoreError(f"{db}: not an evotui database with kept LLM texts ({exc})") from None
    finally:
        con.close()
    out = []
    for row in rows:
        messages, response = _texts(row, raw)
        if messages is not None and response is not None:
            out.append((messages, response, int(row["prompt_tokens"]), int(row["completion_tokens"]),
                        row["finish_reason"] or "stop"))
    return out
