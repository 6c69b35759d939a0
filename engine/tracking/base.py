"""What a tracker backend does, and the metric rows it is handed (engine/tracking)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Mapping, Protocol

Axis = Literal["proposal", "minute"]


@dataclass(frozen=True)
class MetricRow:
    """One point of one series: `key` at `step` of its axis (proposals made, or minutes of the
    run's clock), observed at wall time `t_ms`."""

    key: str
    value: float
    step: int
    axis: Axis
    t_ms: int


@dataclass(frozen=True)
class RunIdentity:
    """What a backend needs to find or start the tracked run of an evotui run."""

    run_id: str
    task: str
    params: Mapping[str, str]
    """The effective config, flattened to dotted keys (credentials already redacted)."""
    resumed: bool


class Backend(Protocol):
    """A tracker library behind one background thread: every method runs on that thread, may
    block on I/O, and raises on failure (the worker counts it; the run goes on)."""

    name: str

    def start(self, identity: RunIdentity) -> str:
        """Find the tracked run of identity.run_id (a resume) or start it; returns its id."""

    def log_metrics(self, rows: list[MetricRow]) -> None: ...

    def log_artifact(self, path: Path, name: str) -> None:
        """A file or a folder, stored under `name`."""

    def log_summary(self, summary: Mapping[str, float]) -> None:
        """The run's closing numbers (the summary's), as the tracked run's own summary."""

    def finish(self, status: str) -> None:
        """status: the evotui run status (completed, interrupted, failed)."""
