"""The numbers a tracker logs, from the one snapshot every observer reads (engine/run/snapshot.py)
and from the run's closing summary (engine/run/summary.py)."""

from __future__ import annotations

from typing import Any, Mapping

from engine.run.snapshot import EngineSnapshot

SUMMARY_KEYS = ("best_score", "seed_score", "proposals", "proposal_attempts", "accepted", "rejected", "failed",
                "discarded_stale", "wasted_tokens", "llm_calls", "prompt_tokens", "completion_tokens",
                "metric_calls", "merges_tried", "merges_accepted", "pool_version", "proposals_per_min", "wall_s")
"""Summary numbers logged as the last point of their series and as the tracked run's summary."""


def snapshot_metrics(s: EngineSnapshot, pool_mean: float | None) -> dict[str, float]:
    """Best, mean, throughput, tokens, spend, queue depth and version gap at this moment."""
    wall_s = float(s.budget_spent.get("wall_s", s.elapsed_s))
    gaps = sum(s.gap_histogram.values())
    out: dict[str, float] = {
        "proposal_attempts": s.proposal_attempts,
        "accepted": s.accepted,
        "rejected": s.rejected,
        "failed": s.failed,
        "discarded_stale": s.discarded_stale,
        "pool_size": s.pool_size,
        "pool_version": s.pool_version,
        "llm_calls": s.llm_calls,
        "metric_calls": s.metric_calls,
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "tokens": s.prompt_tokens + s.completion_tokens,
        "wasted_tokens": s.wasted_tokens,
        "wall_s": round(wall_s, 3),
        "in_flight": s.in_flight_items,
        "queue/total": sum(st.depth for st in s.stages),
        "version_gap_mean": (sum(g * n for g, n in s.gap_histogram.items()) / gaps) if gaps else 0.0,
        "version_gap_max": max(s.gap_histogram, default=0),
    }
    if wall_s > 0:
        out["proposals_per_min"] = s.proposal_attempts / (wall_s / 60)
    if s.best_score is not None:
        out["best_score"] = s.best_score
    if pool_mean is not None:
        out["pool_mean_score"] = pool_mean
    for stage in s.stages:
        out[f"queue/{stage.name}"] = stage.depth
    for key, value in s.budget_spent.items():  # spend against each budget key (usd when priced)
        if key != "wall_s":
            out[f"spent/{key}"] = float(value)
    return out


def summary_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The summary's numbers (None and non-numbers left out)."""
    return {k: float(summary[k]) for k in SUMMARY_KEYS
            if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)}


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as dotted keys with text values (tracker parameters)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = "" if value is None else str(value) if not isinstance(value, (list, dict)) else repr(value)
    return out
