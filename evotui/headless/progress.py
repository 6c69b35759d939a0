"""What the --no-ui progress line says about how far the run is: `N/budget`, a rate that leaves
out paused time (and says how much it left out) and an ETA to the first budget limit.

The rate counts only this session's work (a resumed run's earlier spend is the baseline) over
this session's running time, so a pause or a resume does not skew the ETA.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from engine.events import StateChanged, Subscription
from engine.run.snapshot import EngineSnapshot

ETA_KEYS = ("proposals", "llm_calls", "tokens", "metric_calls", "usd", "gpu_s")
"""Budget keys whose spend grows with work done (wall_s is a clock, handled apart)."""


class PauseClock:
    """Wall seconds the run spent paused, from its state_changed events (exact to the event
    times, however rarely the progress line samples)."""

    def __init__(self, sub: Subscription, now: Callable[[], float] = time.time) -> None:
        self.sub = sub
        self.now = now
        self.closed_s = 0.0
        self.paused_since: float | None = None

    def paused_s(self) -> float:
        for event in self.sub.drain():
            if not isinstance(event, StateChanged):
                continue
            if event.state == "paused" and self.paused_since is None:
                self.paused_since = event.t
            elif event.state != "paused" and self.paused_since is not None:
                self.closed_s += max(0.0, event.t - self.paused_since)
                self.paused_since = None
        open_s = max(0.0, self.now() - self.paused_since) if self.paused_since is not None else 0.0
        return self.closed_s + open_s


@dataclass(frozen=True)
class Progress:
    """How far the run is against its budget, for one progress line."""

    done: float
    """Spend of the budget key shown as N/budget (proposals when limited, else the first limit)."""
    limit: float | None
    key: str
    per_min: float
    """Proposals per running minute of this session (paused time left out)."""
    paused_s: float
    eta_s: float | None
    """Seconds until the first limit is reached at this session's rates (None: no limit, no rate yet)."""
    eta_key: str


def _eta(snap: EngineSnapshot, baseline: Mapping[str, float], running_s: float) -> tuple[float | None, str]:
    best: tuple[float | None, str] = (None, "")
    for key, limit in snap.budget_limits.items():
        if limit is None:
            continue
        spent = float(snap.budget_spent.get(key, 0.0))
        if key == "wall_s":
            left = max(0.0, limit - spent)  # a clock: it runs out at its own pace
        else:
            gained = spent - float(baseline.get(key, 0.0))
            if key not in ETA_KEYS or gained <= 0 or running_s <= 0:
                continue
            left = max(0.0, limit - spent) / (gained / running_s)
        if best[0] is None or left < best[0]:
            best = (left, key)
    return best


def progress_of(snap: EngineSnapshot, baseline: Mapping[str, float], paused_s: float) -> Progress:
    """`baseline`: the budget's spend when this session started (a resumed run's earlier work)."""
    limits = {k: v for k, v in snap.budget_limits.items() if v is not None and k != "wall_s"}
    key = "proposals" if "proposals" in limits else next(iter(limits), "proposals")
    done = float(snap.budget_spent.get(key, snap.proposals if key == "proposals" else 0.0))
    running_s = max(0.0, snap.elapsed_s - paused_s)
    made = float(snap.budget_spent.get("proposals", snap.proposals)) - float(baseline.get("proposals", 0.0))
    per_min = made / (running_s / 60.0) if running_s > 0 else 0.0
    eta_s, eta_key = _eta(snap, baseline, running_s)
    return Progress(done, limits.get(key), key, per_min, paused_s, eta_s, eta_key)


def duration(seconds: float) -> str:
    """Short and fixed-ish width: 45s, 12m05s, 3h07m, 2d04h."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s // 60 % 60:02d}m"
    return f"{s // 86400}d{s // 3600 % 24:02d}h"


def _amount(key: str, value: float) -> str:
    if key == "usd":
        return f"${value:.2f}"
    if key == "gpu_s":
        return f"{value / 3600:.2f}GPU-h"
    return f"{value:g}"


def budget_text(p: Progress) -> str:
    """`prop 22/40 eta 1m05s`: the count against its limit and the time left, for the compact line."""
    name = {"proposals": "prop", "llm_calls": "calls", "metric_calls": "metric"}.get(p.key, p.key)
    count = f"{name} {_amount(p.key, p.done)}" + (f"/{_amount(p.key, p.limit)}" if p.limit is not None else "")
    eta = f" eta {duration(p.eta_s)}" if p.eta_s is not None else ""
    return count + eta


def rate_text(p: Progress, simulated: bool) -> str:
    """The wide line's rate: per wall minute of running (a simulated run's too), pauses named."""
    paused = f", {duration(p.paused_s)} paused left out" if p.paused_s >= 1 else ""
    limit = f" (eta until the {p.eta_key} limit)" if p.eta_s is not None and p.eta_key != p.key else ""
    return f"{p.per_min:.1f} prop/{'wall-' if simulated else ''}min running{paused}{limit}"
