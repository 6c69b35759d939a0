"""Read one run from the store into a Trace (texts in full)."""

from __future__ import annotations

import hashlib
import platform
import sys
from pathlib import Path
from typing import Any

from engine.llm.redact import redact_url
from engine.store.store import Store
from engine.trace.errors import TraceError
from engine.trace.model import Trace

# Where an imported run's summary keeps its provenance and replay environments (importer.py).
IMPORTED_KEY = "evotrace_import"
# Item payload keys that hold the child text: exported once, as the candidate's source.
_CHILD = "child"


def _mode_of(meta: dict[str, Any], operator: str) -> str:
    """How the child was generated: the patch format of a program proposal (diff = SEARCH/REPLACE,
    udiff, full rewrite), merge for a crossover, prompt for a prompt task's rewrite."""
    if operator == "merge":
        return "merge"
    return str(meta.get("patch_format") or "prompt")


def _endpoint(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    if not cfg:
        return None
    # Only what a replay needs; the key's variable name is kept, never a key (none is stored).
    return {"url": redact_url(str(cfg.get("url") or "")), "model": cfg.get("model"),
            "temperature": cfg.get("temperature"), "max_tokens": cfg.get("max_tokens"),
            "stream": cfg.get("stream"), "api_key_env": cfg.get("api_key_env")}


def _file_sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def replay_environment(run: dict[str, Any], candidates: list[dict[str, Any]]) -> dict[str, Any]:
    config = run.get("config") or {}
    task_path = run.get("task_path")
    evaluator = Path(task_path) / "evaluator.py" if task_path else None
    is_program = any(c.get("meta", {}).get("patch_format") for c in candidates) or bool(
        evaluator and evaluator.is_file())
    return {
        "run_id": run["run_id"],
        "task": run["task"],
        "task_path": task_path,
        "task_kind": "program" if is_program else "prompt",
        "evaluator": str(evaluator) if is_program and evaluator else None,
        "evaluator_sha256": _file_sha(evaluator) if is_program and evaluator else None,
        "task_llm": _endpoint(config.get("task_llm")),
        "reflection_llm": _endpoint(config.get("reflection_llm") or config.get("task_llm")),
        "sandbox": (run.get("summary") or {}).get("sandbox"),
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
    }


MIGRATION_KEYS = ("pool_version", "at_commit", "from_island", "to_island", "artifact_ids", "trigger",
                  "from_diversity", "to_diversity", "threshold", "interval", "created_at")
"""A run's island migrations in the export (the migrations table's columns, schema v9)."""


async def collect(store: Store, run_id: str) -> Trace:
    rec = await store.load_run(run_id)
    if rec is None:
        raise TraceError(f"no run {run_id!r} in {store.path}; see `evotui runs --db {store.path}`")
    run = {"run_id": rec.run_id, "task": rec.task, "task_path": rec.task_path, "framework": "evotui",
           "strategy": (rec.config.get("strategy") or {}).get("name") or (rec.summary or {}).get("strategy"),
           "mode": rec.mode, "policy": rec.policy, "backend": rec.backend, "seed": rec.seed,
           "status": rec.status, "created_at": rec.created_at, "updated_at": rec.updated_at,
           "pool_version": rec.pool_version, "config": rec.config, "counters": rec.counters,
           "summary": rec.summary, "rng_state": rec.rng_state}
    migrations = await store.fetch_rows("migrations", run_id)
    if migrations:
        # EvoTrace v1 has no object type for island events and a migration makes no candidate or
        # edge (lineage is untouched); the run object, which allows more properties, keeps them.
        run["island_migrations"] = [{k: m[k] for k in MIGRATION_KEYS} for m in migrations]
    items = await store.fetch_rows("items", run_id)
    item_of_artifact = {str(a["meta"].get("item_id")): a["artifact_id"] for a in rec.artifacts
                        if a.get("meta", {}).get("item_id")}
    candidates: list[dict[str, Any]] = []
    by_item = {i["item_id"]: i for i in items}
    for a in rec.artifacts:
        item = by_item.get(str(a["meta"].get("item_id"))) if a["meta"].get("item_id") else None
        candidates.append({
            "candidate_id": a["artifact_id"], "kind": "artifact", "status": a["status"],
            "outcome": "accepted" if a["status"] != "seed" else "seed", "reason": None,
            "iteration": a["created_version"], "parent_ids": list(a["parent_ids"]),
            "source": a["text"], "components": a.get("components"), "val_mean": a["val_mean"],
            "val_scores": a["val_scores"], "minibatch": a["minibatch"], "meta": a["meta"],
            "created_at": a["created_at"], "item": _item_record(item, a["text"]) if item else None})
    attempts = []
    for item in items:
        if item["item_id"] in item_of_artifact:
            continue
        payload = item["payload"] or {}
        attempts.append(item)
        candidates.append({
            "candidate_id": item["item_id"], "kind": "attempt", "status": item["outcome"] or "open",
            "outcome": item["outcome"] or "open", "reason": item["error"],
            "iteration": item["created_version"], "parent_ids": attempt_parents(item),
            "source": payload.get(_CHILD), "components": None, "val_mean": payload.get("score"),
            "val_scores": None, "minibatch": None, "meta": {}, "created_at": item["created_at"],
            "item": _item_record(item, payload.get(_CHILD))})
    evaluations = [{"candidate_id": e["artifact_id"], **{k: e[k] for k in (
        "example_id", "split", "score", "feedback", "stage", "created_at")}}
        for e in await store.fetch_rows("evaluations", run_id)]
    meta_of = {a["artifact_id"]: a["meta"] for a in rec.artifacts}
    edges = [{"parent_id": e["parent_id"], "child_id": e["child_id"], "operator": e["operator"],
              "generation_mode": _mode_of(meta_of.get(e["child_id"], {}), e["operator"]),
              "created_at": e["created_at"]} for e in rec.lineage]
    edges += attempt_edges(attempts, edges, _run_patch_format(rec.artifacts))
    contexts = []
    async for call in store.iter_llm_calls(run_id):
        item_id = call.get("item_id")
        contexts.append({
            "call_index": len(contexts), "item_id": item_id,
            "candidate_id": item_of_artifact.get(str(item_id), item_id) if item_id else None,
            **{k: call.get(k) for k in ("endpoint", "url", "model", "stage", "status", "finish_reason",
                                        "prompt_tokens", "completion_tokens", "latency_s", "ttft_s",
                                        "retries", "error", "created_at")},
            "messages": call["messages"], "response": call["response"]})
    trace = Trace(run=run, candidates=candidates, evaluations=evaluations, edges=edges, contexts=contexts)
    summary = dict(run["summary"] or {})
    if IMPORTED_KEY in summary:
        # An imported run keeps the replay environments it came with (not this machine's).
        imported = summary.pop(IMPORTED_KEY)
        run["summary"] = summary or None
        run["imported_from"] = imported["from"]
        trace.replay_environments = imported["replay_environments"]
    else:
        trace.replay_environments = [replay_environment(run, candidates)]
    return trace


def attempt_parents(item: dict[str, Any]) -> list[str]:
    """A merge attempt's two parents (as its artifact would have had), else the item's parent."""
    merge = (item["payload"] or {}).get("merge")
    if isinstance(merge, dict) and merge.get("ours") and merge.get("theirs"):
        return [str(merge["ours"]), str(merge["theirs"])]
    parent = item["parent_artifact_id"]
    return [parent] if parent else []


def _run_patch_format(artifacts: list[dict[str, Any]]) -> str | None:
    # The task's patch format is one per run (program_stages records it on every artifact); an
    # attempt's item does not repeat it.
    return next((str(a["meta"]["patch_format"]) for a in artifacts if a.get("meta", {}).get("patch_format")), None)


def attempt_edges(attempts: list[dict[str, Any]], lineage_edges: list[dict[str, Any]],
                  patch_format: str | None) -> list[dict[str, Any]]:
    """parent -> attempt edges for the items that never became artifacts (failed, rejected, open):
    they are search effort too, and the lineage table only records pool members. Built from the
    item rows, so an imported run (whose importer leaves them out of lineage) rebuilds the same
    edges; an attempt that already has a lineage edge keeps it."""
    have = {e["child_id"] for e in lineage_edges}
    out = []
    for item in attempts:
        if item["item_id"] in have:
            continue
        operator = "merge" if isinstance((item["payload"] or {}).get("merge"), dict) else "mutate"
        mode = "merge" if operator == "merge" else (patch_format or "prompt")
        out += [{"parent_id": parent, "child_id": item["item_id"], "operator": operator, "generation_mode": mode,
                 "created_at": item["updated_at"]} for parent in attempt_parents(item)]
    return out


def _item_record(item: dict[str, Any], source: str | None) -> dict[str, Any]:
    """The item row; its child text is left out when it equals the candidate's source."""
    payload = dict(item["payload"] or {})
    if _CHILD in payload and payload[_CHILD] == source:
        payload[_CHILD] = {"same_as": "source"}
    return {k: item[k] for k in ("item_id", "created_version", "parent_artifact_id", "stage", "outcome",
                                 "error", "created_at", "updated_at")} | {"payload": payload}
