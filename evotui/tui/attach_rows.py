"""What an attached view reads from the run's rows besides the snapshot (issue 38, D5 and D6):
the event log backfilled from the run's start (accepts, rejections, failures, stale discards,
review decisions, LLM errors, in time order), each endpoint's latencies and tokens, the spend,
the staleness decisions, and a pending item's evidence and its proposer's rationale.

Reads by rowid (and, for item outcomes, by update time) from the last row read, so a poll costs
the rows added since; the first read is the backfill.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from typing import Any

import aiosqlite

from engine.costs.spend import SpendMeter
from evotui.tui.log_lines import rounded
from evotui.tui.views import ReviewEvidence

LATENCIES_KEPT = 500
"""Per endpoint, as the live view keeps (p50/p95 over the recent calls)."""
RATIONALE_WIDTH = 400
FENCE = re.compile(r"```.*?(?:```|$)", re.S)
OUTCOME_WORDS = {"rejected": "candidate_rejected", "rejected_by_review": "candidate_rejected", "failed": "item_failed",
                 "discarded_stale": "stale_discarded", "discarded_reflect": "stale_discarded",
                 "superseded": "item_superseded"}
"""Item outcomes logged as the live view's event kinds (accepts come from the changelog)."""


def rationale_of(response: str | None) -> str:
    """The proposer's words outside its code blocks (its reasoning), one line, clipped."""
    if not response:
        return ""
    text = " ".join(FENCE.sub(" ", response).split())
    text = text.removeprefix("Reasoning:").strip()
    return text if len(text) <= RATIONALE_WIDTH else text[: RATIONALE_WIDTH - 1] + "…"


def _stamp(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _meter(config: dict) -> SpendMeter | None:
    from engine.config import RunConfig
    from engine.pricing import PriceError

    try:
        return SpendMeter.for_config(RunConfig.model_validate(config))
    except (ValueError, PriceError):
        return None  # a run of an older release: no spend figures


class RowFeed:
    def __init__(self, conn: aiosqlite.Connection, run_id: str, config: dict) -> None:
        self.conn, self.run_id = conn, run_id
        self.meter = _meter(config)
        self.latency: dict[str, deque[float]] = {}
        self.tokens: dict[str, list[int]] = {}
        self.calls: dict[str, list[int]] = {}
        """Endpoint -> [calls, errors]."""
        self.decisions: deque[str] = deque(maxlen=8)
        self._rowid = {"llm_calls": 0, "pool_events": 0, "reviews": 0, "staleness": 0}
        self._outcomes_since = 0.0
        self._logged: set[str] = set()
        self._best: float | None = None
        self._evidence: dict[str, ReviewEvidence] = {}

    async def _rows(self, table: str, columns: str) -> list[Any]:
        rows = list(await self.conn.execute_fetchall(
            f"SELECT rowid, {columns} FROM {table} NOT INDEXED WHERE rowid > ? AND run_id = ? ORDER BY rowid",
            (self._rowid[table], self.run_id)))
        if rows:
            self._rowid[table] = rows[-1][0]
        return rows

    async def read(self) -> list[str]:
        """Log lines for the rows added since the last read, oldest first."""
        lines: list[tuple[float, str]] = []
        for _, endpoint, url, model, stage, status, prompt, completion, latency, error, created in await self._rows(
                "llm_calls", "endpoint, url, model, stage, status, prompt_tokens, completion_tokens, latency_s, error, "
                             "created_at"):
            counts = self.calls.setdefault(endpoint, [0, 0])
            counts[0] += 1
            tok = self.tokens.setdefault(endpoint, [0, 0])
            tok[0] += int(prompt or 0)
            tok[1] += int(completion or 0)
            if latency is not None:
                self.latency.setdefault(endpoint, deque(maxlen=LATENCIES_KEPT)).append(float(latency))
            if self.meter is not None:
                self.meter.record(endpoint, url, str(model or ""), str(stage or ""), int(prompt or 0),
                                  int(completion or 0), float(latency or 0.0))
            if status == "error":
                counts[1] += 1
                lines.append((created, f"{_stamp(created)} llm_error endpoint={endpoint} stage={stage} error={error}"))
        for _, kind, artifact, detail, created in await self._rows("pool_events", "kind, artifact_id, detail_json, created_at"):
            d = json.loads(detail or "{}")
            if kind != "add" or d.get("seed"):
                what = "seed" if d.get("seed") else f"pool_{kind}"
                lines.append((created, f"{_stamp(created)} {what} artifact_id={artifact}"))
                continue
            score = d.get("val_mean")
            best = score is not None and (self._best is None or score > self._best)
            if best:
                self._best = score
            word = "NEW BEST" if best else "joined the population"
            lines.append((created, f"{_stamp(created)} candidate_accepted: {word} item_id={d.get('item_id')} "
                                   f"artifact_id={artifact} val_mean={rounded(score)}"))
        for _, item, gate, decision, reason, created in await self._rows("reviews", "item_id, gate, decision, reason, created_at"):
            why = f" reason={reason}" if reason else ""
            lines.append((created, f"{_stamp(created)} review_decided item_id={item} gate={gate} decision={decision}{why}"))
            self.decisions.append(f"{item} review@{gate} -> {decision}")
        for _, item, stage, gap, decision in await self._rows("staleness", "item_id, stage, gap, decision"):
            if gap:
                self.decisions.append(f"{item} {stage} gap {gap} -> {decision}")
        lines += await self._outcomes()
        return [line for _, line in sorted(lines, key=lambda x: x[0])]

    async def _outcomes(self) -> list[tuple[float, str]]:
        rows = await self.conn.execute_fetchall(
            "SELECT item_id, parent_artifact_id, outcome, error, updated_at FROM items "
            "WHERE run_id = ? AND outcome IS NOT NULL AND updated_at >= ? ORDER BY updated_at",
            (self.run_id, self._outcomes_since))
        out = []
        for item, parent, outcome, error, updated in rows:
            self._outcomes_since = max(self._outcomes_since, float(updated))
            if item in self._logged or outcome not in OUTCOME_WORDS:
                continue
            self._logged.add(item)
            detail = f" parent_id={parent}" if parent else ""
            detail += f" reason={error}" if error else ""
            out.append((updated, f"{_stamp(updated)} {OUTCOME_WORDS[outcome]} item_id={item}{detail}"))
        return out

    async def evidence(self, item_id: str, parent_score: float | None) -> ReviewEvidence | None:
        """A pending item's evidence from its stored row (payload, staleness decisions) and its
        proposer's reply; kept once read (a parked item's row does not change while it waits)."""
        if item_id in self._evidence:
            return self._evidence[item_id]
        rows = list(await self.conn.execute_fetchall(
            "SELECT payload_json FROM items WHERE run_id = ? AND item_id = ?", (self.run_id, item_id)))
        if not rows:
            return None
        p = json.loads(rows[0][0] or "{}")
        stale = [f"{stage} gap {gap} -> {decision}" + (f": {reason}" if reason else "")
                 for stage, gap, decision, reason in await self.conn.execute_fetchall(
                     "SELECT stage, gap, decision, reason FROM staleness WHERE run_id = ? AND item_id = ? ORDER BY rowid",
                     (self.run_id, item_id))]
        ev = evidence_from(p, parent_score, stale, await self.rationale(item_id))
        self._evidence[item_id] = ev
        return ev

    async def rationale(self, item_id: str) -> str:
        from engine.store.texts import call_texts

        rows = list(await self.conn.execute_fetchall(
            "SELECT rowid FROM llm_calls WHERE run_id = ? AND item_id = ? AND stage = 'propose' AND status != 'error' "
            "ORDER BY rowid DESC LIMIT 1", (self.run_id, item_id)))
        if not rows:
            return ""
        self.conn.row_factory = aiosqlite.Row  # call_texts reads columns by name
        try:
            texts = await call_texts(self.conn, rows[0][0])
        finally:
            self.conn.row_factory = None
        return rationale_of(texts.response if texts else None)


def evidence_from(p: dict, parent_score: float | None, staleness: list[str], rationale: str,
                  tags: dict | None = None) -> ReviewEvidence:
    """ReviewEvidence from a work item's payload (live or stored): minibatch scores, its score,
    gaps, the staleness decisions, the strategy's notes and the proposer's rationale."""
    val = p.get("val")
    child = p.get("score") if p.get("score") is not None else (sum(val.values()) / len(val) if val else None)
    return ReviewEvidence(
        child_mb=tuple(float(x) for x in p.get("child_mb") or ()),
        parent_mb=tuple(float(x) for x in p.get("parent_mb") or ()),
        child_score=child, parent_score=parent_score, gaps=dict(p.get("gaps") or {}), staleness=tuple(staleness),
        notes={str(k): str(v) for k, v in (p.get("notes") or {}).items()}, tags=dict(tags or {}),
        rationale=rationale)
