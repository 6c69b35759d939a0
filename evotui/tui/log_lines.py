"""The event log's lines: which engine events the TUI logs, and how one reads (also the
decisions listed under the version gaps)."""

from __future__ import annotations

import time
from typing import Any

from engine.events import Event

LOG_KINDS = frozenset({
    "run_started", "run_finished", "candidate_accepted", "candidate_rejected", "item_failed",
    "stale_discarded", "worker_reallocated", "state_changed", "review_requested", "review_decided",
    "policy_changed", "llm_error", "steered",
})


def event_line(event: Event) -> str | None:
    """One log line for an event worth showing, else None."""
    if event.kind not in LOG_KINDS:
        return None
    d = event.to_dict()
    stamp = time.strftime("%H:%M:%S", time.localtime(d.pop("t")))
    kind = d.pop("event")
    d.pop("minibatch", None)
    if kind == "candidate_accepted":
        # Accepted means "joined the population" (for program tasks every candidate that
        # evaluates does); only some of those beat every earlier artifact. Said first, so an
        # 80-column log shows it.
        kind += ": NEW BEST" if d.pop("best", False) else ": joined the population"
    detail = " ".join(f"{k}={rounded(v)}" for k, v in d.items() if v not in ("", None))
    return f"{stamp} {kind} {detail}"


def rounded(value: Any) -> Any:
    """Floats to 3 decimals (1,234 above a thousand) for the log; anything else as it is."""
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"
    return value


def decision_line(event: Event) -> str | None:
    d = event.to_dict()
    if event.kind == "staleness_decision" and d["gap"]:
        return f"{d['item_id']} {d['stage']} gap {d['gap']} -> {d['decision']}"
    if event.kind == "review_decided":
        return f"{d['item_id']} review@{d['gate']} -> {d['decision']}"
    return None
