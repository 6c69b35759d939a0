"""One background thread per tracker: the event loop hands it work and never waits for it.

Metric rows queued while the thread was busy go to the library in one call (log batching).
A call that raises is counted and remembered, and the run goes on; once start() has failed,
later calls are skipped and counted too (there is no tracked run to log to).
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Callable, Mapping

from engine.tracking.base import Backend, MetricRow, RunIdentity

_STOP = object()


class TrackerWorker:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.name = backend.name
        self.tracked_run_id: str | None = None
        self.failures = 0
        self.first_error: str | None = None
        self.rows_logged = 0
        self.batches = 0
        self._start_failed = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=f"tracking-{self.name}", daemon=True)
        self._thread.start()

    # -- the event loop's side: never blocks ----------------------------------------------
    def start(self, identity: RunIdentity) -> None:
        self._queue.put(("start", identity))

    def log_metrics(self, rows: list[MetricRow]) -> None:
        if rows:
            self._queue.put(("metrics", list(rows)))

    def log_artifact(self, path: Path, name: str) -> None:
        self._queue.put(("artifact", (path, name)))

    def log_summary(self, summary: Mapping[str, float]) -> None:
        self._queue.put(("summary", dict(summary)))

    def finish(self, status: str) -> None:
        self._queue.put(("finish", status))
        self._queue.put((_STOP, None))

    def join(self, timeout_s: float) -> bool:
        """Blocking: call it on a thread (asyncio.to_thread). False: still busy after timeout_s."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # -- the thread ----------------------------------------------------------------------
    def _loop(self) -> None:
        pending = None
        while True:
            kind, payload = pending if pending is not None else self._queue.get()
            pending = None
            if kind is _STOP:
                return
            if self._start_failed and kind != "start":
                self.failures += 1  # no tracked run to log to: the call is lost, and counted
                continue
            if kind == "metrics":
                rows = list(payload)
                while True:  # everything queued behind it that is also metrics: one call
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt[0] != "metrics":
                        pending = nxt
                        break
                    rows.extend(nxt[1])
                self._call(lambda: self._log_rows(rows))
            elif kind == "start":
                self._start_failed = not self._call(lambda: self._start(payload))
            elif kind == "artifact":
                self._call(lambda: self.backend.log_artifact(*payload))
            elif kind == "summary":
                self._call(lambda: self.backend.log_summary(payload))
            elif kind == "finish":
                self._call(lambda: self.backend.finish(payload))

    def _start(self, identity: RunIdentity) -> None:
        self.tracked_run_id = self.backend.start(identity)

    def _log_rows(self, rows: list[MetricRow]) -> None:
        self.backend.log_metrics(rows)
        self.rows_logged += len(rows)
        self.batches += 1

    def _call(self, fn: Callable[[], None]) -> bool:
        try:
            fn()
            return True
        except Exception as exc:  # a tracker's failure never reaches the run
            self.failures += 1
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            return False
