"""The time series the TUI plots, kept apart from any front end (no textual import).

A RunHistory holds raw, bounded event series in run time (wall seconds since the run was
created): best and mean validation score, the times proposals finished, every LLM call's time,
latency and tokens, and each stage's queue depth. It is filled once from the database
(engine/run/history_db.py), so it survives resume and attach, and then extended from engine
snapshots and call records. Derived views (rate per minute, latency percentiles per window) are
computed on demand by the functions below; a plot asks for them only when `revision` changed.

Times are plotted in minutes: wall minutes, or simulated minutes (wall x time_scale) for a run on
the simulated backend, and `time_label` says which.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MAX_POINTS = 20_000
"""Events kept per series; older ones drop off (the database keeps them all)."""


def _series() -> deque:
    return deque(maxlen=MAX_POINTS)


@dataclass
class RunHistory:
    start: float = 0.0
    """Wall time the run was created; series times are seconds after it."""
    time_scale: float = 1.0
    """Plotted seconds per wall second (the simulator's time scale, else 1)."""
    simulated: bool = False
    best: deque = field(default_factory=_series)
    """(t, best validation score) each time the best changed."""
    mean: deque = field(default_factory=_series)
    """(t, mean validation score of the pool) each time it changed."""
    proposals: deque = field(default_factory=_series)
    """t of each finished proposal."""
    calls: deque = field(default_factory=_series)
    """(t, latency_s or None, tokens) of each LLM call."""
    depth: dict[str, deque] = field(default_factory=dict)
    """stage -> (t, queue depth) each time it changed."""
    gaps: dict[int, int] = field(default_factory=dict)
    """version gap -> items checked at that gap (the run's cumulative histogram)."""
    revision: int = 0
    """Bumped by every change; views are recomputed only when it moves."""

    @property
    def time_label(self) -> str:
        return "sim min" if self.simulated else "min"

    def minutes(self, t: float) -> float:
        return t * self.time_scale / 60.0

    def last_t(self) -> float:
        """Run time (s) of the newest event held."""
        ends = [self.proposals[-1] if self.proposals else 0.0]
        ends += [s[-1][0] for s in (self.best, self.mean, self.calls, *self.depth.values()) if s]
        return max(ends)

    # -- extending ---------------------------------------------------------------------------
    def _step(self, series: deque, t: float, value: float) -> bool:
        if series and series[-1][1] == value:
            return False
        series.append((t, value))
        return True

    def add_scores(self, t: float, best: float | None, mean: float | None) -> bool:
        changed = False
        if best is not None:
            changed |= self._step(self.best, t, float(best))
        if mean is not None:
            changed |= self._step(self.mean, t, float(mean))
        self.revision += changed
        return changed

    def add_proposals(self, t: float, n: int) -> bool:
        if n <= 0:
            return False
        self.proposals.extend([t] * n)
        self.revision += 1
        return True

    def add_call(self, t: float, latency_s: float | None, tokens: int) -> None:
        self.calls.append((t, latency_s, int(tokens)))
        self.revision += 1

    def add_depths(self, t: float, depths: Mapping[str, int]) -> bool:
        changed = False
        for stage, d in depths.items():
            changed |= self._step(self.depth.setdefault(stage, _series()), t, float(d))
        self.revision += changed
        return changed

    def set_gaps(self, histogram: Mapping[int, int]) -> bool:
        new = {int(k): int(v) for k, v in histogram.items()}
        if new == self.gaps:
            return False
        self.gaps = new
        self.revision += 1
        return True


class SnapshotFeed:
    """Extends a RunHistory from engine snapshots; the clock advances only while the run runs."""

    def __init__(self, history: RunHistory, clock=time.time) -> None:
        self.history = history
        self.clock = clock
        self.now = history.last_t()
        """Run time (s) of the last running sample: where the plots' time axes end."""
        self._proposals: int | None = None

    def observe(self, snap, mean: float | None, idle: bool) -> None:
        """Record what changed; while `idle` (paused or finished) at the time the run went idle,
        so the time axes stand still while work still in flight lands."""
        h = self.history
        if not idle:
            self.now = self.clock() - h.start
        t = self.now
        h.add_scores(t, snap.best_score, mean)
        if self._proposals is not None:
            h.add_proposals(t, snap.proposals - self._proposals)
        self._proposals = snap.proposals
        if snap.stages:
            h.add_depths(t, {st.name: st.depth for st in snap.stages})
        h.set_gaps(snap.gap_histogram)


# -- views ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One plotted line: x in plotted minutes, y values, and its legend label."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


def _window(now: float, buckets: int) -> tuple[float, float]:
    """Bucket width and first bucket start (seconds): the run from its creation to now."""
    return max(now, 1e-6) / buckets, 0.0


def score_lines(history: RunHistory, now: float) -> list[Line]:
    """Best and mean score as step lines extended to `now`."""
    out = []
    for label, series in (("best", history.best), ("mean", history.mean)):
        if not series:
            continue
        xs = [history.minutes(t) for t, _ in series] + [history.minutes(max(now, series[-1][0]))]
        ys = [v for _, v in series] + [series[-1][1]]
        out.append(Line(label, tuple(xs), tuple(ys)))
    return out


def rate_line(history: RunHistory, times: Iterable[float], now: float, buckets: int, label: str,
              weights: Iterable[float] | None = None) -> Line:
    """Events (or a weight per event) per plotted minute in equal windows up to now: `buckets`
    of them, or fewer when the events carry fewer distinct times (a history extended from
    snapshots has one time per sample; finer windows would alternate between empty and full)."""
    times = list(times)
    buckets = max(1, min(buckets, len(set(times))))
    width, first = _window(now, buckets)
    counts = [0.0] * buckets
    for t, w in zip(times, weights if weights is not None else _ones()):
        i = min(buckets - 1, max(0, int((t - first) / width)))
        counts[i] += w
    per_min = 60.0 / (width * history.time_scale)
    xs = tuple(history.minutes(first + (i + 0.5) * width) for i in range(buckets))
    return Line(label, xs, tuple(c * per_min for c in counts))


def _ones():
    while True:
        yield 1.0


def latency_lines(history: RunHistory, now: float, buckets: int) -> list[Line]:
    """p50 and p95 LLM latency (seconds, as the backend reports them) per window with calls."""
    width, first = _window(now, buckets)
    per: list[list[float]] = [[] for _ in range(buckets)]
    for t, lat, _ in history.calls:
        if lat is not None:
            per[min(buckets - 1, max(0, int((t - first) / width)))].append(lat)
    xs, p50, p95 = [], [], []
    for i, lats in enumerate(per):
        if not lats:
            continue
        xs.append(history.minutes(first + (i + 0.5) * width))
        p50.append(percentile(lats, 50) * history.time_scale)
        p95.append(percentile(lats, 95) * history.time_scale)
    unit = "sim s" if history.simulated else "s"
    return [Line(f"p50 {unit}", tuple(xs), tuple(p50)), Line(f"p95 {unit}", tuple(xs), tuple(p95))]


def depth_lines(history: RunHistory, now: float) -> list[Line]:
    out = []
    for stage, series in history.depth.items():
        if not series:
            continue
        xs = [history.minutes(t) for t, _ in series] + [history.minutes(max(now, series[-1][0]))]
        ys = [v for _, v in series] + [series[-1][1]]
        out.append(Line(stage, tuple(xs), tuple(ys)))
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linearly interpolated between the nearest ranks (the same value as
    statistics.quantiles(..., method="inclusive"), without computing all 99 cut points)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
