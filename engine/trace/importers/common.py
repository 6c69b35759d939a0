"""What the native importers share: a source's candidates (in the source's own ids) become a
Trace that `importer.write_trace` stores as a read-only run, the source ids kept in each
artifact's meta. Artifact ids are evotui's (a000000, a000001, ...) in the source's creation order."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.trace.errors import TraceError
from engine.trace.model import Trace

SEED_STATUS = "seed"
POOL_STATUS = "confirmed"  # a validated pool member (engine/pool.py)


@dataclass
class NativeCandidate:
    source_id: str
    text: str
    parent_source_ids: list[str]
    score: float | None
    iteration: int
    created_at: float
    meta: dict[str, Any] = field(default_factory=dict)
    val_scores: dict[str, float] | None = None
    components: list[dict[str, Any]] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    """LLM calls that made it: {model, messages, response, prompt_tokens, completion_tokens}."""


def finite(value: Any) -> float | None:
    """A score as a float; None for what is not a finite number (a failed program's NaN, a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def run_name(fmt: str, source: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", source.stem if source.is_file() else source.name).strip("-.") or "run"
    return f"{fmt}-{stem}"


@dataclass
class NativeRun:
    fmt: str
    """openevolve | shinka | gepa"""
    source: Path
    task_kind: str
    """program | prompt: what the source evolved."""
    candidates: list[NativeCandidate]
    created_at: float
    details: dict[str, Any] = field(default_factory=dict)
    """Source facts kept in the run's summary (checkpoint iteration, best id, ...)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Source ids of copies (ShinkaEvolve's island copies of the seed) -> the original's id."""

    def to_trace(self, task_name: str | None, task_path: str | None) -> Trace:
        if not self.candidates:
            raise TraceError(f"{self.source}: the {self.fmt} run holds no candidates; nothing to import")
        ours = {c.source_id: f"a{n:06d}" for n, c in enumerate(self.candidates)}
        if len(ours) != len(self.candidates):
            raise TraceError(f"{self.source}: the {self.fmt} run names a candidate id twice")
        ours |= {copy: ours[orig] for copy, orig in self.aliases.items() if orig in ours and copy not in ours}
        candidates, edges, evaluations, contexts = [], [], [], []
        for c in self.candidates:
            cid = ours[c.source_id]
            parents = list(dict.fromkeys(ours[p] for p in c.parent_source_ids if p in ours and ours[p] != cid))
            meta = {"source_format": self.fmt, "source_id": c.source_id, **c.meta}
            if c.parent_source_ids:
                meta["source_parent_ids"] = list(c.parent_source_ids)
                # A parent the source no longer holds (OpenEvolve drops programs from its population).
                missing = [p for p in c.parent_source_ids if p not in ours]
                if missing:
                    meta["missing_parents"] = missing
            item_id = f"i{cid[1:]}" if c.calls else None
            if item_id:
                meta["item_id"] = item_id
            candidates.append({
                "candidate_id": cid, "kind": "artifact",
                "status": SEED_STATUS if not c.parent_source_ids else POOL_STATUS,
                "outcome": "seed" if not c.parent_source_ids else "accepted", "reason": None,
                "iteration": c.iteration, "parent_ids": parents, "source": c.text, "components": c.components,
                "val_mean": c.score, "val_scores": c.val_scores, "minibatch": None, "meta": meta,
                "created_at": c.created_at, "item": _item(item_id, c, parents) if item_id else None})
            operator = "merge" if len(parents) > 1 else "mutate"
            edges += [{"parent_id": p, "child_id": cid, "operator": operator, "created_at": c.created_at}
                      for p in parents]
            if self.fmt == "gepa" and c.val_scores:
                evaluations += [{"candidate_id": cid, "example_id": ex, "split": "val", "score": s,
                                 "feedback": None, "stage": "evaluate", "created_at": c.created_at}
                                for ex, s in c.val_scores.items()]
            for call in c.calls:
                contexts.append({"endpoint": "reflection", "url": "", "model": call.get("model") or "",
                                 "stage": "propose", "status": "ok", "finish_reason": None,
                                 "prompt_tokens": call.get("prompt_tokens") or 0,
                                 "completion_tokens": call.get("completion_tokens") or 0, "latency_s": None,
                                 "ttft_s": None, "retries": 0, "error": None, "created_at": c.created_at,
                                 "messages": call["messages"], "response": call.get("response"),
                                 "item_id": item_id})
        scored = [c for c in candidates if c["val_mean"] is not None]
        best = max(scored, key=lambda c: c["val_mean"]) if scored else None
        updated = max(c["created_at"] for c in candidates)
        run = {"run_id": run_name(self.fmt, self.source), "task": task_name or "unknown", "task_path": task_path,
               "framework": self.fmt, "mode": None, "policy": None, "backend": None, "seed": None,
               "status": "completed", "created_at": self.created_at, "updated_at": max(updated, self.created_at),
               "pool_version": len(candidates), "config": {}, "counters": None, "rng_state": None,
               "summary": {"source_format": self.fmt, "source": str(self.source.resolve()), **self.details,
                           "best_id": best["candidate_id"] if best else None,
                           "best_score": best["val_mean"] if best else None}}
        env = {"run_id": run["run_id"], "task": run["task"], "task_path": task_path, "task_kind": self.task_kind,
               "evaluator": None, "evaluator_sha256": None, "task_llm": None, "reflection_llm": None,
               "sandbox": None, "python": None, "platform": None, "source_format": self.fmt}
        return Trace(run=run, candidates=candidates, evaluations=evaluations, edges=edges, contexts=contexts,
                     replay_environments=[env])


def _item(item_id: str, c: NativeCandidate, parents: list[str]) -> dict[str, Any]:
    """The pipeline item that made the child: what `evotui replay` finds its propose prompt by."""
    return {"item_id": item_id, "created_version": c.iteration, "parent_artifact_id": parents[0] if parents else None,
            "stage": "update", "outcome": "accepted", "error": None, "created_at": c.created_at,
            "updated_at": c.created_at, "payload": {"child": {"same_as": "source"}, "score": c.score}}
