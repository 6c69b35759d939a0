"""The summary of a run's end (EngineRun.summary): counts, scores, cost, time basis, per stage.

After the database stopped taking writes (a full disk), the live counters include work that never
reached it; the summary then reports what the database holds, read back the way a resume reads it,
and under "unsaved" what the session did beyond that (a resume does it again).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.run.snapshot import EngineSnapshot, StoredRun, build_snapshot
from engine.store import Store, StoreError

if TYPE_CHECKING:
    from engine.run.view import RunView


def run_summary(run: "RunView", status: str, reason: str) -> dict:
    """The summary of a run's end: printed by the front ends and stored in runs.summary_json."""
    live = _summary(run, status, reason, run.snapshot())
    if not run.ctx.store.failed:
        return live
    try:
        committed = _summary(run, status, reason, committed_snapshot(run.db_path, run.ctx.run_id))
    except StoreError as exc:  # said, not swallowed: the figures are then the session's own
        return {**live, "counts_from": f"this session (the database could not be read back: {exc})"}
    keys = ("proposals", "proposal_attempts", "llm_calls", "metric_calls")
    return {**committed, "counts_from": "database",
            "unsaved": {k: live[k] - committed[k] for k in keys if live[k] != committed[k]}}


def committed_snapshot(db_path: Path, run_id: str) -> EngineSnapshot:
    """The run as its database holds it, with the row counts a resume trusts over the stored
    counters (engine/run/setup.py restore_stored_run: rows committed after the last counters save)."""
    record = _read_back(db_path, run_id)
    row = {"rng_state": record.rng_state, "counters": record.counters, "config": record.config,
           "status": record.status, "mode": record.mode, "policy": record.policy, "backend": record.backend}
    snap = build_snapshot(StoredRun(run_id, row, record.artifacts, record.pool_events))
    counts = record.counts or {}
    charged = counts.get("proposals") or {}
    attempts = max(snap.proposal_attempts, sum(charged.values()))
    calls = max(snap.llm_calls, int(counts.get("llm_calls", 0)))
    prompt = max(snap.prompt_tokens, int(counts.get("prompt_tokens", 0)))
    completion = max(snap.completion_tokens, int(counts.get("completion_tokens", 0)))
    spent = dict(snap.budget_spent)
    spent.update(proposals=max(float(spent.get("proposals", 0)), attempts),
                 llm_calls=max(float(spent.get("llm_calls", 0)), calls),
                 tokens=max(float(spent.get("tokens", 0)), prompt + completion))
    return replace(snap, proposal_attempts=attempts, proposals=max(snap.proposals, int(charged.get("made", 0))),
                   llm_calls=calls, prompt_tokens=prompt, completion_tokens=completion, budget_spent=spent)


def _read_back(db_path: Path, run_id: str):
    """load_run through a read-only store of its own, on a thread of its own: the caller is the
    run's finishing code, synchronous, on the event loop of a store whose writer has stopped."""
    async def read():
        store = await Store.open(db_path, create=False, readonly=True)
        try:
            record = await store.load_run(run_id)
        finally:
            await store.close()
        if record is None:
            raise StoreError(f"{db_path} holds no run {run_id}")
        return record

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="summary-read") as pool:
        return pool.submit(asyncio.run, read()).result()


def _summary(run: "RunView", status: str, reason: str, snap: EngineSnapshot) -> dict:
    ctx = run.ctx
    scale = ctx.config.sim.time_scale if ctx.config.uses_sim else 1.0
    minutes = run.pipeline_s * scale / 60.0
    return {
        "run_id": ctx.run_id,
        "db": str(run.db_path),
        "status": status,
        "stop_reason": reason,
        "task": ctx.task.name,
        "mode": ctx.config.pipeline.mode,
        "strategy": run.strategy.name,
        "policy": ctx.policy.name,
        "backend": ctx.backend,
        "simulated": ctx.config.uses_sim,
        "proposals": snap.proposals,
        "proposal_attempts": snap.proposal_attempts,
        "accepted": snap.accepted,
        "rejected": snap.rejected,
        "failed": snap.failed,
        "discarded_stale": snap.discarded_stale,
        "wasted_tokens": snap.wasted_tokens,
        "pool_version": snap.pool_version,
        "seed_score": snap.seed_score,
        "best_score": snap.best_score,
        "best_id": snap.best_id,
        "llm_calls": snap.llm_calls,
        "prompt_tokens": snap.prompt_tokens,
        "completion_tokens": snap.completion_tokens,
        "metric_calls": snap.metric_calls,
        "merges_tried": snap.merges_tried,
        "merges_accepted": snap.merges_accepted,
        "superseded": snap.superseded,
        # JSON object keys are strings: the gap as text, in gap order.
        "gap_histogram": {str(gap): n for gap, n in snap.gap_histogram.items()},
        "staleness": dict(snap.staleness),
        "wall_s": round(ctx.elapsed(), 3),
        "pipeline_minutes": round(minutes, 4),
        "time_basis": "simulated" if ctx.config.uses_sim else "wall",
        "proposals_per_min": round(snap.proposals / minutes, 3) if minutes > 0 else None,
        "budget_spent": dict(snap.budget_spent),
        # What each stage costs (a strategy's agents included), per proposal the LLM returned.
        "llm_by_stage": {stage: {"calls": n, "tokens": snap.tokens_by_stage.get(stage, 0),
                                 "calls_per_proposal": round(n / snap.proposals, 3) if snap.proposals else None}
                         for stage, n in sorted(snap.calls_by_stage.items())},
        # Per endpoint (several per stage with [task_llm] endpoints): calls, errors, health.
        "llm_endpoints": [f for c in {id(c): c for c in (ctx.task_llm, ctx.reflection_llm)}.values()
                          for f in c.figures()],
        "spend": _spend(run),
        **_kind_figures(run, snap),
    }


def _spend(run: "RunView") -> dict:
    """Dollars and GPU-hours of the run's LLM calls (every session), per stage, model and endpoint.
    A model the price table lacks is $0: said once among the run's warnings."""
    meter = run.ctx.budget.meter
    if meter is None:
        return {}
    for warning in meter.warnings:
        if warning not in run.warnings:
            run.warnings.append(warning)
    budget = run.ctx.budget
    return {**meter.figures(), "max_usd": budget.limit("usd"), "max_gpu_hours": run.ctx.config.budget.max_gpu_hours}

def _kind_figures(run: "RunView", snap: EngineSnapshot) -> dict:
    """Program tasks: filter counts, patch retries, tolerant blocks (the stored counters, via the
    snapshot); any task: the kind's own figures (a program's sandbox isolation level)."""
    figures = run.orchestrator.handlers.figures()
    if run.ctx.task.kind != "program":
        return figures
    return {"filters": dict(snap.filters), "patch_retries": snap.patch_retries,
            "tolerant_blocks": snap.tolerant_blocks, **figures}
