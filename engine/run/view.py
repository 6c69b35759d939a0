"""A run as the code that reports on it reads it: the end summary (engine/run/summary.py) and the
tracking session (engine/tracking/session.py). EngineRun (engine/run/runner.py) provides it; the
protocol is named here so those modules do not depend on the runner, which calls them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from engine.context import RunContext
    from engine.pipeline.orchestrator import Orchestrator
    from engine.run.snapshot import EngineSnapshot
    from engine.strategy.protocols import Strategy


class RunView(Protocol):
    ctx: RunContext
    db_path: Path
    resumed: bool
    pipeline_s: float
    """Wall seconds the pipeline ran in this session."""
    warnings: list[str]
    """Problems for the front end to show after the run (the summary adds its own)."""
    orchestrator: Orchestrator
    strategy: Strategy

    def snapshot(self) -> EngineSnapshot: ...
