"""A run's trackers, observing it from the side: started with the run, fed from the event bus
and snapshots, finished with its summary and artifacts (engine/run/runner.py calls open and finish).

Nothing here waits for a tracker on the event loop: rows go to TrackerWorker threads, the
EvoTrace export is written on a thread, and finish() joins the threads off the loop.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from engine import events as ev
from engine.llm.redact import redact_mapping
from engine.tracking.base import Backend, MetricRow, RunIdentity
from engine.tracking.metrics import flatten, snapshot_metrics, summary_metrics
from engine.tracking.settings import TrackingConfig, default_mlflow_uri
from engine.tracking.worker import TrackerWorker

if TYPE_CHECKING:
    from engine.run.view import RunView
    from engine.run.snapshot import EngineSnapshot

FINISH_TIMEOUT_S = 120.0
"""Longest the end of a run waits for its trackers to send what is queued (a slow server)."""


def make_backends(cfg: TrackingConfig, db_path: Path) -> list[Backend]:
    """The configured trackers; their libraries are imported on their threads, at start."""
    backends: list[Backend] = []
    if cfg.mlflow is not None:
        from engine.tracking.mlflow_backend import MlflowBackend

        backends.append(MlflowBackend(cfg.mlflow.uri or default_mlflow_uri(db_path), cfg.mlflow.experiment))
    if cfg.wandb is not None:
        from engine.tracking.wandb_backend import WandbBackend

        folder = Path(cfg.wandb.dir).expanduser() if cfg.wandb.dir else Path(db_path).expanduser().resolve().parent
        backends.append(WandbBackend(cfg.wandb.project, cfg.wandb.entity, cfg.wandb.mode, folder))
    return backends


class TrackingSession:
    def __init__(self, workers: list[TrackerWorker], snapshot: Callable[[], "EngineSnapshot"],
                 pool_mean: Callable[[], float | None], every_s: float,
                 clock: Callable[[], float] = time.monotonic, bus: ev.EventBus | None = None) -> None:
        self.workers = workers
        self.snapshot = snapshot
        self.pool_mean = pool_mean
        self.every_s = every_s
        self.clock = clock
        self.bus = bus
        self.failures = 0
        """Failures of the session's own work (the EvoTrace export), beside the workers' own."""
        self.problems: list[str] = []
        self._last_attempts: int | None = None
        self._last_minute: int | None = None
        self._told = False
        self._sub: ev.Subscription | None = None
        self._task: asyncio.Task | None = None

    @classmethod
    def open(cls, run: "RunView") -> "TrackingSession | None":
        """Start the run's trackers (None without [tracking]); call before RunStarted is published."""
        ctx = run.ctx
        cfg = ctx.config.tracking
        if not cfg.enabled:
            return None
        workers = [TrackerWorker(b) for b in make_backends(cfg, run.db_path)]
        identity = RunIdentity(run_id=ctx.run_id, task=ctx.task.name, resumed=run.resumed,
                               params=flatten(redact_mapping(ctx.config.model_dump(mode="json"))))
        for worker in workers:
            worker.start(identity)
        session = cls(workers, run.snapshot, lambda: _pool_mean(ctx.pool), cfg.every_s, bus=ctx.bus)
        session._sub = ctx.bus.subscribe(maxlen=1000)  # only a wake-up call: dropped events lose nothing
        session._task = asyncio.create_task(session._watch(), name="tracking")
        return session

    # -- observation ---------------------------------------------------------------------
    def observe(self) -> None:
        """A row per proposal count seen (several ending together share one row)."""
        snap = self.snapshot()
        if snap.proposal_attempts == self._last_attempts:
            return
        self._last_attempts = snap.proposal_attempts
        self._send(snap, "proposal", snap.proposal_attempts)

    def tick(self) -> None:
        """A per-minute row, its step the minute of the run's clock (continued by a resume)."""
        snap = self.snapshot()
        minute = int(float(snap.budget_spent.get("wall_s", snap.elapsed_s)) // self.every_s)
        if minute == self._last_minute:
            return
        self._last_minute = minute
        self._send(snap, "minute", minute)

    def _send(self, snap: "EngineSnapshot", axis: str, step: int) -> None:
        t_ms = int(time.time() * 1000)
        rows = [MetricRow(k, float(v), step, axis, t_ms) for k, v in snapshot_metrics(snap, self.pool_mean()).items()]
        for worker in self.workers:
            worker.log_metrics(rows)
        self._tell_first_failure()

    def _tell_first_failure(self) -> None:
        """The first failure of a tracker, once, as a notice the front ends show (the run goes on)."""
        if self._told or self.bus is None:
            return
        for worker in self.workers:
            if worker.failures:
                self._told = True
                self.bus.publish(ev.Notice(level="warning", message=f"tracking: {worker.name} failed "
                                           f"({worker.first_error}); the run goes on without it"))
                return

    async def _watch(self) -> None:
        next_tick = self.clock() + self.every_s
        while True:
            try:
                batch = await asyncio.wait_for(self._sub.wait(), max(0.0, next_tick - self.clock()))
            except TimeoutError:
                batch = []
            if batch:
                self.observe()
            if self.clock() >= next_tick:
                self.tick()
                next_tick = self.clock() + self.every_s
            if self._sub.closed and not batch:
                return

    # -- the end -------------------------------------------------------------------------
    async def finish(self, run: "RunView", summary: dict, status: str) -> list[str]:
        """Last rows (the summary's numbers at its proposal count), the best artifact and the
        EvoTrace export, the tracked run's end; returns warnings for the front end. Call after
        the run's store has closed (the export reads the database)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._sub is not None and self.bus is not None:
            self.bus.unsubscribe(self._sub)
        self.observe()
        self.tick()
        final = summary_metrics(summary)
        step = int(summary.get("proposal_attempts") or 0)
        t_ms = int(time.time() * 1000)
        rows = [MetricRow(k, v, step, "proposal", t_ms) for k, v in final.items()]
        folder = Path(run.db_path).expanduser().resolve().parent / f".evotui-tracking-{run.ctx.run_id}"
        files = await asyncio.to_thread(self._write_artifacts, run, folder)
        for worker in self.workers:
            worker.log_metrics(rows)
            worker.log_summary(final)
            for name, path in files:
                worker.log_artifact(path, name)
            worker.finish(status)
        done = await asyncio.to_thread(lambda: all(w.join(FINISH_TIMEOUT_S) for w in self.workers))
        if done:
            shutil.rmtree(folder, ignore_errors=True)
        return self.warnings(done)

    def _write_artifacts(self, run: "RunView", folder: Path) -> list[tuple[str, Path]]:
        from engine.tracking.exports import write_artifacts

        try:
            return write_artifacts(run.db_path, run.ctx.run_id, run.ctx.pool.best(), folder)
        except Exception as exc:  # a failed export costs the artifact, not the run
            self.failures += 1
            self.problems.append(f"the EvoTrace export for tracking failed ({type(exc).__name__}: {exc})")
            return []

    def report(self) -> dict:
        """Per tracker: its run id, rows logged and failures (for the run's summary)."""
        return {w.name: {"run_id": w.tracked_run_id, "rows": w.rows_logged, "batches": w.batches,
                         "failures": w.failures} for w in self.workers}

    def warnings(self, joined: bool = True) -> list[str]:
        out = [f"tracking: {p}" for p in self.problems]
        for w in self.workers:
            if w.failures:
                out.append(f"tracking: {w.name}: {w.failures} call(s) failed, first: {w.first_error}; "
                           "the run itself is unaffected")
        if not joined:
            out.append(f"tracking: a tracker was still sending after {FINISH_TIMEOUT_S:g} s; what it had not "
                       "sent is lost")
        return out


def _pool_mean(pool) -> float | None:
    scores = [a.val_mean for a in pool.confirmed()]
    return sum(scores) / len(scores) if scores else None
