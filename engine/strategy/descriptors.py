"""Task-declared behavioural descriptors: the axes of LoongFlow's MAP-Elites grids (§3.3, §4.2.2).

A native task.toml may declare one or two axes:

    [[descriptor]]
    name = "smallest circle"
    metric = "min_radius"      # a metric the evaluator returns, or a built-in: "length", "novelty"
    range = [0.0, 0.1]
    bins = 5

Each axis bins its value over the declared range (a value outside it goes to the end bin), so a
cell means the same thing all run long; an artifact without the metric (an evaluation that
failed) sits in bin 0. With none declared the grid keeps its default axes: text length and novelty
(or coverage), min-max scaled over the island (engine/selection/islands.py). At most two axes, as
the islands screen draws a plane; a single axis leaves the second coordinate 0.

A metric the seed's evaluation does not return is a mistake in task.toml: the first grid read
after the seed is evaluated raises DescriptorError naming the key (a metric that only failed
evaluations omit is fine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import Field, ValidationError, model_validator

from engine.config.service import StrictModel
from engine.context import FatalRunError
from engine.pool import Artifact

BUILTINS = ("length", "novelty")
MAX_AXES = 2


class DescriptorError(FatalRunError):
    """A [[descriptor]] in task.toml that cannot be used; the message names the key and the fix.
    Fatal with exit code 2 (bad input) when found during a run, at the first pick."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class DescriptorSpec(StrictModel):
    """One [[descriptor]] table of task.toml."""

    name: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    """An evaluator metric name (the dict the evaluator returns) or a built-in: length, novelty."""
    range: tuple[float, float]
    """[lo, hi]: the values binned; lo < hi."""
    bins: int = Field(ge=1)

    @model_validator(mode="after")
    def _range_ordered(self) -> DescriptorSpec:
        lo, hi = self.range
        if not lo < hi:
            raise ValueError(f"range = [{lo}, {hi}] must have lo < hi")
        return self


@dataclass(frozen=True)
class Axis:
    name: str
    metric: str
    lo: float
    hi: float
    bins: int

    def value(self, art: Artifact, length: int, novelty: float) -> float | None:
        """The artifact's raw value on this axis; None when its evaluation returned no such metric."""
        if self.metric == "length":
            return float(length)
        if self.metric == "novelty":
            return novelty
        metrics = art.meta.get("metrics") if isinstance(art.meta, Mapping) else None
        v = metrics.get(self.metric) if isinstance(metrics, Mapping) else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def bin(self, value: float | None) -> int:
        if value is None:
            return 0
        return max(0, min(self.bins - 1, int((value - self.lo) / (self.hi - self.lo) * self.bins)))


@dataclass(frozen=True)
class Descriptors:
    """The declared axes (hashable: part of the island index's settings key)."""

    axes: tuple[Axis, ...]
    source: str = "task.toml"

    @property
    def bins(self) -> int:
        """The grid's side for display: the larger axis's bins."""
        return max(a.bins for a in self.axes)

    def cell(self, art: Artifact, length: int, novelty: float) -> tuple[int, int]:
        coords = [a.bin(a.value(art, length, novelty)) for a in self.axes]
        return (coords[0], coords[1] if len(coords) > 1 else 0)

    def check_seed(self, seed: Artifact) -> None:
        """DescriptorError when the seed's evaluation returned metrics but not a declared one."""
        metrics = seed.meta.get("metrics") if isinstance(seed.meta, Mapping) else None
        if not isinstance(metrics, Mapping) or not metrics:
            return  # the seed failed its evaluation: nothing to check against yet
        for n, a in enumerate(self.axes):
            if a.metric not in BUILTINS and a.metric not in metrics:
                known = ", ".join(sorted(k for k, v in metrics.items() if isinstance(v, (int, float))))
                raise DescriptorError(
                    f"{self.source}: [[descriptor]] #{n + 1} metric = {a.metric!r} is not a metric the evaluator "
                    f"returns ({known}); use one of those or a built-in ({', '.join(BUILTINS)})")


def parse_descriptors(raw: Any, source: str = "task.toml") -> Descriptors | None:
    """The [[descriptor]] tables of a task.toml (None when there are none); DescriptorError names
    the table and key that is wrong."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise DescriptorError(f"{source}: descriptor must be an array of tables ([[descriptor]] name, metric, range, bins)")
    if not raw:
        return None
    if len(raw) > MAX_AXES:
        raise DescriptorError(f"{source}: {len(raw)} [[descriptor]] tables; declare at most {MAX_AXES} (the grid is a plane)")
    axes = []
    for n, table in enumerate(raw):
        try:
            spec = DescriptorSpec.model_validate(table)
        except ValidationError as err:
            first = err.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "range"
            raise DescriptorError(f"{source}: [[descriptor]] #{n + 1} {key}: {first['msg']}") from None
        axes.append(Axis(spec.name, spec.metric, spec.range[0], spec.range[1], spec.bins))
    return Descriptors(tuple(axes), source)
