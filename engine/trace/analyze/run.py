"""One analysis of a run: its sections (lineage, cycling, edit types, held-out) as one JSON-able dict."""

from __future__ import annotations

from typing import Any

from engine.store.store import Store
from engine.trace import collect
from engine.trace.analyze import cycling, edits, heldout, lineage
from engine.trace.llm import Choice, endpoint_config, make_client


async def analyze(store: Store, run_id: str, *, judge: bool, choice: Choice) -> dict[str, Any]:
    trace = await collect.collect(store, run_id)
    out: dict[str, Any] = {"run_id": run_id, "task": trace.run["task"], "status": trace.run["status"],
                           "lineage": lineage.analyze(trace), "cycling": cycling.analyze(trace)}
    if judge:
        cfg = endpoint_config(trace.run.get("config") or {}, "reflection_llm", choice)
        found = edits.edits_of(trace, cfg.model)
        stats = await edits.label(store, found, lambda: make_client(cfg, trace.run.get("config") or {}, "judge"),
                                  cfg.model)
        out["edit_types"] = edits.summarise(trace, found, stats) | {"judge_model": cfg.model}
    out["heldout"] = await heldout.analyze(store, trace, llm_ok=judge, choice=choice)
    return out
