"""Fill a RunHistory from a run's database rows, so plots survive resume and attach.

Reads through its own read-only connection (WAL: the driving process keeps writing), by rowid
ranges: the artifacts (scores), the propose stage's finish times (proposals), every LLM call
(time, latency, tokens), each stage's enqueue and start times (queue depth) and the run state's
gap histogram. `load_history` reads everything once;
`HistoryReader.more` then reads only rows added since (an attached viewer polls it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiosqlite

from engine.run.history import RunHistory

_KEPT = ("seed", "confirmed", "speculative")
"""Artifact statuses that count towards the pool's best and mean (removed ones do not)."""


class HistoryReader:
    """One run's history and the high-water marks of what was read."""

    def __init__(self, conn: aiosqlite.Connection, run_id: str, history: RunHistory) -> None:
        self.conn = conn
        self.run_id = run_id
        self.history = history
        self._seen = {"artifacts": 0, "item_stages": 0, "llm_calls": 0}
        self._scores: list[float] = []
        self._best: float | None = None
        self._depth: dict[str, int] = {}

    async def _rows(self, table: str, columns: str) -> list[Any]:
        # NOT INDEXED: a range on rowid reads only the rows added since (the run_id index would
        # visit every row of the run on each poll of an attached viewer).
        rows = list(await self.conn.execute_fetchall(
            f"SELECT rowid, {columns} FROM {table} NOT INDEXED WHERE rowid > ? AND run_id = ? ORDER BY rowid",
            (self._seen[table], self.run_id)))
        if rows:
            self._seen[table] = rows[-1][0]
        return rows

    async def more(self, calls_only: bool = False) -> bool:
        """Read rows added since the last call into the history; whether anything was added.
        `calls_only` reads just the LLM calls: a viewer that also follows snapshots takes scores,
        proposals, depths and gaps from them (rows written late would land out of time order)."""
        h = self.history
        before = h.revision
        if not calls_only:
            await self._scores_depths_gaps()
        for _, created, latency, tokens in await self._rows(
                "llm_calls", "created_at, latency_s, prompt_tokens + completion_tokens"):
            h.add_call(created - h.start, latency, tokens or 0)
        return h.revision != before

    async def _scores_depths_gaps(self) -> None:
        h = self.history
        for _, created, val_mean, status in await self._rows("artifacts", "created_at, val_mean, status"):
            if val_mean is None or status not in _KEPT:
                continue
            self._scores.append(float(val_mean))
            if status != "speculative":
                self._best = max(self._best if self._best is not None else float(val_mean), float(val_mean))
            h.add_scores(created - h.start, self._best, sum(self._scores) / len(self._scores))
        events: list[tuple[float, str, int]] = []
        proposals = []
        for _, stage, enq, started, finished in await self._rows(
                "item_stages", "stage, enqueued_at, started_at, finished_at"):
            if enq is not None:
                events.append((enq, stage, 1))
                if started is not None:
                    events.append((started, stage, -1))
            if stage == "propose" and finished is not None:
                proposals.append(finished - h.start)
        for t in sorted(proposals):
            h.add_proposals(t, 1)
        for t, stage, step in sorted(events):
            self._depth[stage] = max(0, self._depth.get(stage, 0) + step)
            h.add_depths(t - h.start, {stage: self._depth[stage]})
        counters = await self.conn.execute_fetchall(
            "SELECT counters_json FROM runs WHERE run_id = ?", (self.run_id,))
        if counters and counters[0][0]:
            h.set_gaps(json.loads(counters[0][0]).get("gap_histogram") or {})


async def open_reader(db_path: Path | str, run_id: str) -> HistoryReader | None:
    """A reader on the run's rows, its history filled with everything stored so far; None if the
    database has no such run. The caller closes `reader.conn`."""
    uri = f"{Path(db_path).resolve().as_uri()}?mode=ro"
    conn = await aiosqlite.connect(uri, uri=True)
    try:
        rows = list(await conn.execute_fetchall(
            "SELECT created_at, backend, config_json FROM runs WHERE run_id = ?", (run_id,)))
        if not rows:
            await conn.close()
            return None
        created, backend, config_json = rows[0]
        config = json.loads(config_json or "{}")
        simulated = str(backend or "").startswith("simulated")
        scale = float((config.get("sim") or {}).get("time_scale", 1.0)) if simulated else 1.0
        reader = HistoryReader(conn, run_id, RunHistory(start=float(created), time_scale=scale, simulated=simulated))
        await reader.more()
    except BaseException:
        await conn.close()
        raise
    return reader


async def load_history(db_path: Path | str, run_id: str) -> RunHistory | None:
    """Everything stored so far, read once."""
    reader = await open_reader(db_path, run_id)
    if reader is None:
        return None
    await reader.conn.close()
    return reader.history
