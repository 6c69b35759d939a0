"""The summary of a run's end (EngineRun.summary): counts, scores, cost, time basis, per stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.snapshot import EngineSnapshot

if TYPE_CHECKING:
    from engine.runner import EngineRun


def run_summary(run: "EngineRun", status: str, reason: str) -> dict:
    """The summary of a run's end: printed by the front ends and stored in runs.summary_json."""
    ctx = run.ctx
    snap = run.snapshot()
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
        "llm_by_stage": {stage: {"calls": n, "tokens": ctx.tally.tokens_by_stage[stage],
                                 "calls_per_proposal": round(n / snap.proposals, 3) if snap.proposals else None}
                         for stage, n in sorted(ctx.tally.calls_by_stage.items())},
        # Per endpoint (several per stage with [task_llm] endpoints): calls, errors, health.
        "llm_endpoints": [f for c in {id(c): c for c in (ctx.task_llm, ctx.reflection_llm)}.values()
                          for f in c.figures()],
        **_kind_figures(run, snap),
    }

def _kind_figures(run: "EngineRun", snap: EngineSnapshot) -> dict:
    """Program tasks: filter counts, patch retries, tolerant blocks (the stored counters, via the
    snapshot); any task: the kind's own figures (a program's sandbox isolation level)."""
    figures = run.orchestrator.handlers.figures()
    if run.ctx.task.kind != "program":
        return figures
    return {"filters": dict(snap.filters), "patch_retries": snap.patch_retries,
            "tolerant_blocks": snap.tolerant_blocks, **figures}
