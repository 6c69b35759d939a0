"""What the TUI shows and steers, independent of where the run lives.

A Backend yields immutable Frames (one engine snapshot plus the histories the UI plots),
log lines, the artifact tree and pending reviews (those values are defined in views.py), and
executes control commands. LiveBackend wraps an EngineRun in this process; AttachBackend
(attach.py) reads another process's database and talks to its control socket; tests use a
frozen backend. Nothing here imports textual, so the bench and tests can use it directly.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any

from engine.components.versions import ComponentsView, components_view, rollback_versions
from engine.events import Event
from engine.components.hot_swap import HotSwapError, hot_swap
from engine.run.history import RunHistory, SnapshotFeed
from engine.run.history_db import load_history
from engine.strategy.islands_view import IslandsView, island_options
from evotui.control import ControlError, apply_command
from engine.pipeline.review import PendingReview, ReviewError
from engine.pool import PoolError
from engine.run.admin import AdminError, restore_with
from engine.run.analysis import RunAnalysis, analyze_run
from engine.store.store import Store, StoreError
from engine.trace.errors import TraceError
from engine.items import current_item
from evotui.tui.attach_rows import evidence_from, rationale_of
from evotui.tui.caches import Cached, IslandsCache
from evotui.tui.log_lines import decision_line, event_line
from evotui.tui.views import ArtifactView, Frame, LLMStat, ReviewEvidence, percentile, provenance

class BackendError(Exception):
    """A control command failed; the message is shown to the user as is."""


async def analysis_of(db_path, run_id: str) -> RunAnalysis:
    """`evotui analyze`'s figures for a run, read from its database; failures as BackendError."""
    try:
        return await analyze_run(db_path, run_id)
    except (TraceError, StoreError, OSError) as exc:
        raise BackendError(f"cannot analyse {run_id}: {exc}") from None


async def audit_rows_of(db_path, run_id: str) -> list[dict]:
    """A run's audit rows (schema v6), read through a read-only connection of its own: the live
    store may be closed once the run ended."""
    try:
        store = await Store.open(db_path, create=False, readonly=True)
    except StoreError as exc:
        raise BackendError(f"cannot read the audit rows: {exc}") from None
    try:
        return await store.fetch_rows("audit", run_id)
    except StoreError as exc:
        raise BackendError(f"cannot read the audit rows: {exc}") from None
    finally:
        await store.close()


READ_ONLY = ("this view is read-only: no live driver takes {what} (restore a stored run with "
             "`evotui restore RUN NAME@X.Y.Z`; a hot-swap needs a live run)")


class Backend:
    """Base: read-only, no data. Subclasses override what they support."""

    source = "none"
    can_control = False
    finished = ""

    def frame(self) -> Frame | None:
        return None

    def poll(self) -> list[str]:
        """Log lines since the last call (events are drained here, never pushed per event)."""
        return []

    def artifacts(self) -> list[ArtifactView]:
        return []

    def pending(self) -> list[PendingReview]:
        return []

    def evidence(self, item_id: str) -> ReviewEvidence | None:
        """Scores, staleness decisions and strategy notes of a pending item, if known."""
        return None

    @property
    def has_islands(self) -> bool:
        """The run's strategy keeps an island archive (loongflow, contextevolve with islands)."""
        return False

    def islands(self) -> IslandsView | None:
        """The island archive now (None for strategies without islands)."""
        return None

    async def analysis(self) -> RunAnalysis | None:
        """`evotui analyze`'s figures from the run's database (None: this view has no database)."""
        return None

    @property
    def has_components(self) -> bool:
        """The run's artifacts are named components (the components screen is offered)."""
        return False

    def components(self) -> ComponentsView | None:
        """The components, their versions and the active artifact now."""
        return None

    async def audit_rows(self) -> list[dict] | None:
        """The run's audit rows (empty: its strategy writes none; None: no database)."""
        return None

    async def restore(self, artifact_id: str, reason: str) -> dict:
        """Make `artifact_id` the active best again through the ledger; BackendError if refused."""
        raise BackendError(READ_ONLY.format(what="a restore"))

    async def edit_component(self, name: str, text: str, reason: str) -> dict:
        """Hot-swap `name` of the active artifact (engine/components/hot_swap.py); BackendError if refused."""
        raise BackendError(READ_ONLY.format(what="an edit"))

    async def control(self, cmd: str, **args: Any) -> Any:
        raise BackendError("this view is read-only: the driving process does not accept control")

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


class LiveBackend(Backend):
    """An EngineRun in this process. Latency stats come from the LLM call sink."""

    source = "live"
    can_control = True

    def __init__(self, run) -> None:
        self.run = run
        self._sub = run.bus.subscribe(maxlen=5000)
        self._decisions: deque[str] = deque(maxlen=8)
        self._latency: dict[str, deque] = {}
        self._tokens: dict[str, list[int]] = {}
        self._notes: dict[str, str] = {}
        self._rejected: dict[str, ArtifactView] = {}
        self._parents: dict[str, str] = {}
        self._staleness: dict[str, list[str]] = {}
        self._rationale: dict[str, str] = {}
        """Item -> its proposer's reasoning (the reply outside the code block), for the review gate."""
        self._mean_cache: tuple[int, float | None] = (-1, None)
        self._islands = IslandsCache()
        self._components = Cached()
        cfg = run.ctx.config
        self.history = RunHistory(start=time.time(), time_scale=cfg.sim.time_scale if cfg.uses_sim else 1.0,
                                  simulated=cfg.uses_sim)
        self.feed = SnapshotFeed(self.history)
        sink = run.ctx.call_sink
        forward = sink.target

        def record(rec) -> None:
            item = current_item.get()
            if rec.stage == "propose" and rec.response and item:
                if len(self._rationale) > 5000:  # items that ended long ago
                    self._rationale.pop(next(iter(self._rationale)))
                self._rationale[item] = rationale_of(rec.response)
            self.history.add_call(time.time() - self.history.start, rec.latency_s,
                                  rec.prompt_tokens + rec.completion_tokens)
            self._latency.setdefault(rec.endpoint, deque(maxlen=500)).append(rec.latency_s)
            tok = self._tokens.setdefault(rec.endpoint, [0, 0])
            tok[0] += rec.prompt_tokens
            tok[1] += rec.completion_tokens
            forward(rec)

        sink.target = record

    def _mean(self, version: int) -> float | None:
        if self._mean_cache[0] != version:
            arts = self.run.ctx.pool.artifacts()
            self._mean_cache = (version, sum(a.val_mean for a in arts) / len(arts) if arts else None)
        return self._mean_cache[1]

    async def start(self) -> None:
        """Load the run's stored history (a resumed run's plots start where it left off). Call
        before the engine starts, so no call is both stored and recorded here."""
        stored = await load_history(self.run.db_path, self.run.ctx.run_id)
        if stored is not None:
            stored.time_scale, stored.simulated = self.history.time_scale, self.history.simulated
            self.history = stored
            self.feed = SnapshotFeed(stored)

    def frame(self) -> Frame:
        snap = self.run.snapshot()
        mean = self._mean(snap.pool_version)
        self.feed.observe(snap, mean, idle=bool(self.finished) or snap.state == "paused")
        llm = []
        for s in snap.llm:
            lat = list(self._latency.get(s.endpoint, ()))
            tok = self._tokens.get(s.endpoint, [0, 0])
            llm.append(LLMStat(s.endpoint, s.in_flight, s.calls, s.errors, s.retries,
                               percentile(lat, 50), percentile(lat, 95), tok[0], tok[1]))
        cfg = self.run.ctx.config
        meter = self.run.ctx.budget.meter
        evaluator = self.run.orchestrator.handlers.figures().get("evaluator") or {}
        return Frame(snap=snap, llm=tuple(llm), decisions=tuple(self._decisions),
                     time_scale=cfg.sim.time_scale if cfg.uses_sim else 1.0, source=self.source,
                     can_control=True, finished=self.finished, history=self.history,
                     history_rev=self.history.revision, history_now=round(self.feed.now, 1),
                     spend=meter.figures() if meter is not None else None, gpu=evaluator.get("gpu_slots"))

    def poll(self) -> list[str]:
        lines = []
        for event in self._sub.drain():
            self._track(event)
            if (dec := decision_line(event)) is not None:
                self._decisions.append(dec)
            if (line := event_line(event)) is not None:
                lines.append(line)
        return lines

    def _track(self, event: Event) -> None:
        d = event.to_dict()
        if event.kind == "staleness_decision":
            if len(self._staleness) > 5000:  # items that ended long ago; the store keeps them all
                self._staleness.pop(next(iter(self._staleness)))
            self._staleness.setdefault(d["item_id"], []).append(
                f"{d['stage']} gap {d['gap']} -> {d['decision']}" + (f": {d['reason']}" if d["reason"] else ""))
        elif event.kind in ("candidate_selected", "review_requested"):
            self._parents[d["item_id"]] = d["parent_id"]
        elif event.kind == "review_decided":
            self._notes[d["item_id"]] = f"{d['decision']} at {d['gate']}" + (f": {d['reason']}" if d["reason"] else "")
            if d["decision"] == "reject":
                self._rejected[d["item_id"]] = ArtifactView(
                    d["item_id"], self._parents.get(d["item_id"]), 0, "rejected", None, "", self._notes[d["item_id"]])
        elif event.kind == "candidate_rejected" and d["item_id"] not in self._rejected:
            self._rejected[d["item_id"]] = ArtifactView(d["item_id"], d["parent_id"], 0, "rejected", None, "", d["reason"])
        elif event.kind == "run_finished":
            self.finished = d["status"]

    def artifacts(self) -> list[ArtifactView]:
        out = []
        for a in self.run.ctx.pool.artifacts():
            item = str(a.meta.get("item_id", ""))
            out.append(ArtifactView(a.artifact_id, a.parent_ids[0] if a.parent_ids else None, a.created_version,
                                    a.status, a.val_mean if a.val_scores else None, a.text,
                                    provenance(dict(a.meta), a.parent_ids, self._notes.get(item, "")), a.meta))
        out.extend(v for v in self._rejected.values() if v.parent_id)
        return out

    def pending(self) -> list[PendingReview]:
        return self.run.review.pending()

    @property
    def has_islands(self) -> bool:
        return island_options(self.run.ctx.config.strategy.model_dump()) is not None

    async def analysis(self) -> RunAnalysis | None:
        return await analysis_of(self.run.db_path, self.run.ctx.run_id)

    def islands(self) -> IslandsView | None:
        pool = self.run.ctx.pool
        return self._islands.get(pool.version, self.run.ctx.config.strategy.model_dump(), pool.artifacts,
                                 getattr(self.run.ctx.task, "descriptors", None))

    @property
    def has_components(self) -> bool:
        return getattr(self.run.ctx.task, "seed_components", None) is not None

    def components(self) -> ComponentsView | None:
        pool = self.run.ctx.pool

        def build() -> ComponentsView | None:
            best = pool.best()
            return components_view(pool.artifacts(), best.artifact_id if best else None,
                                   rollback_versions(pool.changes_since(0)))

        return self._components.get(pool.version, build)

    async def audit_rows(self) -> list[dict] | None:
        return await audit_rows_of(self.run.db_path, self.run.ctx.run_id)

    def _refuse_ended(self) -> None:
        if self.finished:
            raise BackendError(f"the run has ended ({self.finished}): restore a version with `evotui restore "
                               f"{self.run.ctx.run_id} NAME@X.Y.Z --db {self.run.db_path}`; a hot-swap needs a live run")

    async def restore(self, artifact_id: str, reason: str) -> dict:
        self._refuse_ended()
        try:
            result = restore_with(self.run.ctx.ledger, artifact_id, reason, by="tui")
        except (AdminError, PoolError, KeyError) as exc:
            raise BackendError(str(exc).strip("'\"")) from None
        return dataclasses.asdict(result)

    async def edit_component(self, name: str, text: str, reason: str) -> dict:
        self._refuse_ended()
        try:
            return await hot_swap(self.run.orchestrator.handlers, name, text, reason, by="tui")
        except (HotSwapError, ValueError, KeyError) as exc:
            raise BackendError(str(exc)) from None

    def evidence(self, item_id: str) -> ReviewEvidence | None:
        # PendingReview carries texts only; the parked item's products hold the scores and notes
        # (read in the stored layout, as for a stored item).
        entry = self.run.review._pending.get(item_id)
        if entry is None:
            return None
        item = entry[1]
        pool = self.run.ctx.pool
        parent = pool.get(item.parent_id) if item.parent_id in pool else None
        return evidence_from(item.to_payload(), parent.val_mean if parent is not None and parent.val_scores else None,
                             self._staleness.get(item_id, []), self._rationale.get(item_id, ""), dict(item.tags))

    async def control(self, cmd: str, **args: Any) -> Any:
        reasons = {"drain": "drain requested in the TUI", "stop": "stopped from the TUI"}
        req = {"cmd": cmd, **args}
        if cmd in reasons:
            req.setdefault("reason", reasons[cmd])
        try:
            return apply_command(self.run, req)
        except (ControlError, ReviewError, ValueError, KeyError) as exc:
            raise BackendError(str(exc)) from None
