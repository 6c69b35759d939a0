"""The result of `evotui.optimize`: GEPA's GEPAResult (gepa/core/result.py, 0.1.x) field for field,
so code written against `gepa.optimize`'s result reads it unchanged, plus evotui's run handles.

Validation examples are keyed by their position in the valset (GEPA's DataId for a list valset).
The counts GEPA keeps in its state are read back from the run's database: a candidate's discovery
count from its pool_events row (the metric calls spent when it was accepted, less its own full
validation, as GEPA snapshots the count before that validation), the full validations from the
items that reached validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from engine.store.store import Store

# GEPAResult._VALIDATION_SCHEMA_VERSION: its from_dict reads what to_dict writes at this version.
GEPA_SCHEMA_VERSION = 2


@dataclass(frozen=True)
class OptimizeResult:
    """GEPA's result fields, read from the run's pool (seed first, then commit order)."""

    candidates: list[dict[str, str]]
    parents: list[list[int | None]]
    val_aggregate_scores: list[float]
    val_subscores: list[dict[int, float]]
    """Per candidate, its score on each validation example, keyed by the example's valset index."""
    per_val_instance_best_candidates: dict[int, set[int]]
    """Per validation example, the candidates with the highest score on it (GEPA's Pareto front)."""
    discovery_eval_counts: list[int | None]
    """Per candidate, the metric calls spent before its full validation (the seed: 0); None for a
    candidate accepted before evotui recorded the count (a run resumed from an older version)."""
    total_metric_calls: int
    num_full_val_evals: int
    """Full validation-set evaluations: the seed's and every proposal's that reached validation."""
    run_dir: str
    """The folder holding the run's database (evotui keeps the run there, not in a run_dir)."""
    seed: int
    run_id: str
    db: str
    status: str
    stop_reason: str
    artifact_ids: list[str]
    # GEPA's optional fields that evotui has no source for (no multi-objective scores, rollout
    # outputs are not kept, candidates are always dicts).
    val_aggregate_subscores: None = None
    per_objective_best_candidates: None = None
    objective_pareto_front: None = None
    best_outputs_valset: None = None
    _str_candidate_key: None = None

    _VALIDATION_SCHEMA_VERSION: ClassVar[int] = GEPA_SCHEMA_VERSION

    @property
    def best_idx(self) -> int:
        """The highest validation mean; the earliest candidate on a tie (as GEPA)."""
        scores = self.val_aggregate_scores
        return max(range(len(scores)), key=lambda i: (scores[i], -i))

    @property
    def best_candidate(self) -> dict[str, str]:
        return self.candidates[self.best_idx]

    @property
    def num_candidates(self) -> int:
        return len(self.candidates)

    @property
    def num_val_instances(self) -> int:
        return len(self.per_val_instance_best_candidates)

    @property
    def best_refiner_prompt(self) -> str | None:
        return self.candidates[self.best_idx].get("refiner_prompt")

    def to_dict(self) -> dict[str, Any]:
        """GEPAResult.to_dict()'s keys and shapes (gepa's GEPAResult.from_dict reads it back), then
        evotui's run handles."""
        return {
            "candidates": [dict(c) for c in self.candidates],
            "parents": [list(p) for p in self.parents],
            "val_aggregate_scores": list(self.val_aggregate_scores),
            "val_subscores": [dict(s) for s in self.val_subscores],
            "best_outputs_valset": None,
            "per_val_instance_best_candidates": {k: sorted(v) for k, v in self.per_val_instance_best_candidates.items()},
            "val_aggregate_subscores": None,
            "per_objective_best_candidates": None,
            "objective_pareto_front": None,
            "discovery_eval_counts": list(self.discovery_eval_counts),
            "total_metric_calls": self.total_metric_calls,
            "num_full_val_evals": self.num_full_val_evals,
            "run_dir": self.run_dir,
            "seed": self.seed,
            "_str_candidate_key": None,
            "best_idx": self.best_idx,
            "validation_schema_version": GEPA_SCHEMA_VERSION,
            "run_id": self.run_id, "db": self.db, "status": self.status, "stop_reason": self.stop_reason,
            "artifact_ids": list(self.artifact_ids),
        }


def pareto_front(subscores: list[dict[int, float]]) -> dict[int, set[int]]:
    """Per example, every candidate whose score on it is the highest any candidate reached."""
    front: dict[int, set[int]] = {}
    for k in sorted({k for s in subscores for k in s}):
        best = max(s[k] for s in subscores if k in s)
        front[k] = {i for i, s in enumerate(subscores) if s.get(k) == best}
    return front


async def run_counts(db: Path, run_id: str, artifact_ids: list[str],
                     n_val: int) -> tuple[list[int | None], int]:
    """(discovery count per artifact, full validations) from the run's rows in the database."""
    store = await Store.open(db, create=False, readonly=True)
    try:
        rec = await store.load_run(run_id)
        items = await store.fetch_rows("items", run_id)
    finally:
        await store.close()
    assert rec is not None  # the run just ran in this database
    spent: dict[str, int] = {}
    for event in rec.pool_events:  # the last commit/confirm row of an artifact holds its count
        calls = (event.get("detail") or {}).get("metric_calls")
        if event["artifact_id"] and isinstance(calls, int):
            spent[event["artifact_id"]] = calls
    kinds = {a["artifact_id"]: a for a in rec.artifacts}
    discovery: list[int | None] = []
    for aid in artifact_ids:
        if kinds[aid]["status"] == "seed":
            discovery.append(0)  # GEPA counts from the seed's validation
        else:
            discovery.append(spent[aid] - n_val if aid in spent else None)
    validated = sum("val" in (i["payload"] or {}) for i in items)
    # A hot-swapped edit (no item) is validated on the whole set too.
    edits = sum(1 for a in rec.artifacts if a["status"] != "seed" and not (a["meta"] or {}).get("item_id"))
    return discovery, 1 + validated + edits
