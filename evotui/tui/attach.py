"""`evotui attach`: a TUI on a run another process drives.

The database is opened read-only (WAL lets the driver keep writing) and polled once a second in
an asyncio task on the UI loop. If the driver serves a control socket (evotui.control), the live
snapshot and pending reviews come from it and the controls work; otherwise the view is
read-only and the dashboard shows what the database holds (no queue depths). Either way the event
log, latencies, spend and a pending item's evidence are read from the rows (attach_rows.py).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from engine.components.versions import ComponentsView, active_artifact, components_view, rollback_versions
from engine.run.history import SnapshotFeed
from engine.run.history_db import HistoryReader, open_reader
from engine.strategy.islands_view import IslandsView, island_options
from engine.pipeline.review import PendingReview
from engine.run.analysis import RunAnalysis
from engine.run.state import artifact_from_row, change_from_row
from engine.run.stored_descriptors import stored_descriptors
from engine.run.snapshot import EngineSnapshot, StoredRun, build_snapshot
from engine.store.store import Store, StoreError
from evotui.control import ControlClient, ControlError, snapshot_from_dict, socket_path
from evotui.tui.attach_rows import RowFeed
from evotui.tui.backend import READ_ONLY, ArtifactView, Backend, BackendError, Frame, LLMStat, analysis_of, provenance
from evotui.tui.caches import Cached, IslandsCache
from evotui.tui.views import ReviewEvidence, percentile

POLL_S = 1.0


class AttachError(Exception):
    """Cannot attach; the message names the problem and the fix."""


class AttachBackend(Backend):
    def __init__(self, db_path: Path, run_id: str | None) -> None:
        self.db_path = Path(db_path)
        self.run_id = run_id or ""
        self.store: Store | None = None
        self.client: ControlClient | None = None
        self._row: dict[str, Any] = {}
        self._artifact_rows: list[dict[str, Any]] = []
        self._pool_events: list[dict[str, Any]] = []
        self._artifacts: list[ArtifactView] = []
        self._live: EngineSnapshot | None = None
        self._gpu: dict | None = None
        """The driver's GPU slot occupancy (the control socket's gpu_slots), while it is attached."""
        self._pending: list[PendingReview] = []
        self._lines: list[str] = []
        self._task: asyncio.Task | None = None
        self.reader: HistoryReader | None = None
        self.rows: RowFeed | None = None
        """The log, latencies, spend and evidence read from the rows (backfilled at start)."""
        self._evidence: dict[str, ReviewEvidence] = {}
        self.feed: SnapshotFeed | None = None
        self.problem = ""
        self._islands = IslandsCache()
        self._descriptors: tuple[Any] | None = None
        self._components = Cached()

    @property
    def source(self) -> str:  # type: ignore[override]
        return "attached"  # the status line adds READ-ONLY when the view cannot control the run

    @property
    def can_control(self) -> bool:  # type: ignore[override]
        return self.client is not None and self.client.connected

    async def start(self) -> None:
        try:
            self.store = await Store.open(self.db_path, create=False, readonly=True)
        except StoreError as exc:
            raise AttachError(str(exc)) from None
        runs = await self.store.list_runs()
        if not self.run_id:
            if not runs:
                await self.close()
                raise AttachError(f"{self.db_path} holds no runs; start one with `evotui run TASK --db {self.db_path}`")
            self.run_id = runs[0]["run_id"]
        elif not any(r["run_id"] == self.run_id for r in runs):
            await self.close()
            known = ", ".join(r["run_id"] for r in runs[:5]) or "none"
            raise AttachError(f"no run {self.run_id!r} in {self.db_path} (runs: {known}); list them with `evotui runs --db {self.db_path}`")
        self.reader = await open_reader(self.db_path, self.run_id)
        if self.reader is not None:
            self.feed = SnapshotFeed(self.reader.history)
            stored = await self.store.fetch_rows("runs", self.run_id)
            self.rows = RowFeed(self.reader.conn, self.run_id, (stored[0].get("config") or {}) if stored else {})
        client = ControlClient(socket_path(self.db_path, self.run_id))
        if await client.connect():
            self.client = client
        else:
            self.problem = "no control socket: the run is not being driven by a live process, or it predates control; read-only"
        await self._refresh()
        self._task = asyncio.create_task(self._loop(), name="attach-poll")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            try:
                await self._refresh()
            except StoreError as exc:
                self._lines.append(f"database read failed: {exc}")

    async def _refresh(self) -> None:
        assert self.store is not None
        rows = await self.store.fetch_rows("runs", self.run_id)
        if rows:
            old = self._row.get("status")
            self._row = rows[0]
            if old is not None and old != self._row["status"]:
                self._lines.append(f"{time.strftime('%H:%M:%S')} run status {old} -> {self._row['status']}")
        # The changelog first: every artifact a change names is then among the artifacts read.
        events = await self.store.fetch_rows("pool_events", self.run_id)
        arts = await self.store.fetch_rows("artifacts", self.run_id)
        reviews = await self.store.fetch_rows("reviews", self.run_id)
        notes = {r["item_id"]: f"{r['decision']} at {r['gate']}" for r in reviews}
        if self.rows is not None:
            self._lines.extend(await self.rows.read())
        self._artifact_rows, self._pool_events = arts, events
        self._artifacts = [
            ArtifactView(a["artifact_id"], (a["parent_ids"] or [None])[0], a["created_version"], a["status"],
                         a["val_mean"], a["text"],
                         provenance(a["meta"] or {}, a["parent_ids"] or [],
                                    notes.get(str((a["meta"] or {}).get("item_id", "")), "")), a["meta"] or {})
            for a in arts
        ]
        if self.reader is not None:
            await self.reader.more(calls_only=True)
        if self.can_control:
            assert self.client is not None
            try:
                self._live = snapshot_from_dict(await self.client.request("snapshot"))
                self._pending = [PendingReview(**p) for p in await self.client.request("pending")]
                self._gpu = await self.client.request("gpu_slots")
            except ControlError as exc:
                self._lines.append(f"control: {exc}; now read-only")
                self._live, self._pending, self._gpu = None, [], None
                await self.client.close()
        if self.rows is not None:
            scores = {a.artifact_id: a.score for a in self._artifacts}
            for p in self._pending:
                ev = await self.rows.evidence(p.item_id, scores.get(p.parent_id))
                if ev is not None:
                    self._evidence[p.item_id] = ev

    def _db_snapshot(self) -> EngineSnapshot:
        """Without the control socket: the snapshot of what the database holds, made by the same
        builder as the live one, from the stored run state (no queues, no per-endpoint figures)."""
        return build_snapshot(StoredRun(self.run_id, self._row, self._artifact_rows, self._pool_events))

    def frame(self) -> Frame | None:
        if not self._row:
            return None
        snap = self._live or self._db_snapshot()
        scores = [a.score for a in self._artifacts if a.score is not None]
        mean = sum(scores) / len(scores) if scores else None
        idle = str(self._row.get("status", "")) != "running"
        if self.feed is not None:
            self.feed.observe(snap, mean, idle=idle or snap.state == "paused")
        config = self._row.get("config") or {}
        scale = float((config.get("sim") or {}).get("time_scale", 1.0)) if snap.simulated else 1.0
        status = str(self._row.get("status", ""))
        rows = self.rows
        summary = self._row.get("summary") or {}
        return Frame(snap=snap, llm=self._llm(snap), decisions=tuple(rows.decisions) if rows else (), time_scale=scale,
                     source=self.source, can_control=self.can_control, finished="" if status == "running" else status,
                     spend=rows.meter.figures() if rows is not None and rows.meter is not None else None,
                     gpu=self._gpu if self._live is not None else (summary.get("evaluator") or {}).get("gpu_slots"),
                     **self._history_fields())

    def _llm(self, snap: EngineSnapshot) -> tuple[LLMStat, ...]:
        """Each endpoint's figures: live counts from the snapshot (the database's without the
        socket), latencies and tokens from the stored calls."""
        rows = self.rows
        if rows is None:
            return tuple(LLMStat(s.endpoint, s.in_flight, s.calls, s.errors, s.retries, None, None, 0, 0) for s in snap.llm)

        def stat(endpoint: str, in_flight: int, calls: int, errors: int, retries: int) -> LLMStat:
            lat = list(rows.latency.get(endpoint, ()))
            tok = rows.tokens.get(endpoint, [0, 0])
            return LLMStat(endpoint, in_flight, calls, errors, retries, percentile(lat, 50), percentile(lat, 95),
                           tok[0], tok[1])

        if self._live is not None and snap.llm:  # the driver's endpoints, with in-flight counts and retries
            return tuple(stat(s.endpoint, s.in_flight, s.calls, s.errors, s.retries) for s in snap.llm)
        return tuple(stat(name, 0, n, err, 0) for name, (n, err) in sorted(rows.calls.items()))

    def evidence(self, item_id: str) -> ReviewEvidence | None:
        return self._evidence.get(item_id)

    def _history_fields(self) -> dict[str, Any]:
        if self.feed is None:
            return {}
        h = self.feed.history
        return {"history": h, "history_rev": h.revision, "history_now": round(self.feed.now, 1)}

    def poll(self) -> list[str]:
        lines, self._lines = self._lines, []
        return lines

    def artifacts(self) -> list[ArtifactView]:
        return list(self._artifacts)

    def pending(self) -> list[PendingReview]:
        return list(self._pending)

    def _strategy(self) -> dict[str, Any]:
        return dict((self._row.get("config") or {}).get("strategy") or {})

    @property
    def has_islands(self) -> bool:
        return island_options(self._strategy()) is not None

    async def analysis(self) -> RunAnalysis | None:
        return await analysis_of(self.db_path, self.run_id)

    def islands(self) -> IslandsView | None:
        key = (len(self._artifact_rows), len(self._pool_events))
        if self._descriptors is None and self._row:  # the run's declared grid axes, read once from its task.toml
            self._descriptors = (stored_descriptors(self._row.get("task_path"))[0],)
        return self._islands.get(key, self._strategy(), lambda: [artifact_from_row(a) for a in self._artifact_rows],
                                 self._descriptors[0] if self._descriptors else None)

    @property
    def has_components(self) -> bool:
        return any(a.get("components") is not None for a in self._artifact_rows)

    def components(self) -> ComponentsView | None:
        def build() -> ComponentsView | None:
            arts = [artifact_from_row(a) for a in self._artifact_rows]
            changes = [change_from_row(c) for c in self._pool_events]
            return components_view(arts, active_artifact(arts, changes), rollback_versions(changes))

        return self._components.get((len(self._artifact_rows), len(self._pool_events)), build)

    async def audit_rows(self) -> list[dict] | None:
        if self.store is None:
            return None
        try:
            return await self.store.fetch_rows("audit", self.run_id)
        except StoreError as exc:
            raise BackendError(f"cannot read the audit rows: {exc}") from None

    async def _ask(self, what: str, cmd: str, reply_timeout_s: float, **args: Any) -> dict:
        """One administrative command through the control socket, then a fresh read of the rows."""
        if not self.can_control:
            raise BackendError(READ_ONLY.format(what=what) + (f"; {self.problem}" if self.problem else ""))
        assert self.client is not None
        try:
            result = await self.client.request(cmd, reply_timeout_s=reply_timeout_s, **args)
        except ControlError as exc:
            raise BackendError(str(exc)) from None
        await self._refresh()
        return result

    async def restore(self, artifact_id: str, reason: str) -> dict:
        return await self._ask("a restore", "restore", 5.0, artifact_id=artifact_id, reason=reason)

    async def edit_component(self, name: str, text: str, reason: str) -> dict:
        # The driver validates the edit on the validation set before it replies.
        return await self._ask("an edit", "edit_component", 600.0, component=name, text=text, reason=reason)

    async def control(self, cmd: str, **args: Any) -> Any:
        if not self.can_control:
            return await super().control(cmd, **args)
        if cmd == "stop":
            raise BackendError("attach does not stop the driving process; use drain, or quit to detach")
        assert self.client is not None
        try:
            result = await self.client.request(cmd, **args)
        except ControlError as exc:
            raise BackendError(str(exc)) from None
        await self._refresh()
        return result

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
        if self.reader is not None:
            await self.reader.conn.close()
            self.reader = None
        if self.store is not None:
            await self.store.close()
            self.store = None

