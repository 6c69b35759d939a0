"""A run as the six EvoTrace object types, texts in full: what export writes, import reads back,
and analyze/replay work on. Built from the store (collect.py) or from an export (importer.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT = "evotrace"
SCHEMA_VERSION = 1
OBJECT_TYPES = ("runs", "candidates", "evaluations", "edges", "contexts", "replay_environments")


@dataclass
class Trace:
    run: dict[str, Any]
    candidates: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    contexts: list[dict[str, Any]] = field(default_factory=list)
    replay_environments: list[dict[str, Any]] = field(default_factory=list)

    def rows(self, kind: str) -> list[dict[str, Any]]:
        return [self.run] if kind == "runs" else getattr(self, kind)

    @property
    def run_id(self) -> str:
        return str(self.run["run_id"])

    def artifacts(self) -> list[dict[str, Any]]:
        """Candidates that entered the pool (have a score), in creation order."""
        return [c for c in self.candidates if c["kind"] == "artifact"]

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {c["candidate_id"]: c for c in self.candidates}
