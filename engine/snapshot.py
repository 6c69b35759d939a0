"""Immutable snapshots of a running engine, sampled by observers (TUI, progress lines, bench).

Building one is cheap (no I/O) and never blocks the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from engine.pipeline.orchestrator import Orchestrator


@dataclass(frozen=True)
class StageSnapshot:
    name: str
    depth: int
    capacity: int
    busy: int
    workers: int
    blocked: int
    rate_per_s: float
    forwarded: int
    ended: int


@dataclass(frozen=True)
class LLMSnapshot:
    endpoint: str
    url: str
    in_flight: int
    calls: int
    errors: int
    retries: int


@dataclass(frozen=True)
class EngineSnapshot:
    run_id: str
    state: str
    mode: str
    policy: str
    backend: str
    simulated: bool
    elapsed_s: float
    pool_version: int
    pool_size: int
    seed_score: float | None
    best_score: float | None
    best_id: str | None
    in_flight_items: int
    stages: tuple[StageSnapshot, ...]
    gap_histogram: Mapping[int, int]
    staleness: Mapping[str, int]
    proposals: int
    proposal_attempts: int
    accepted: int
    rejected: int
    failed: int
    discarded_stale: int
    wasted_tokens: int
    llm: tuple[LLMSnapshot, ...]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    budget_spent: Mapping[str, float]
    budget_limits: Mapping[str, float | None]
    budget_exhausted: str | None
    max_gap: int
    review_pending: int
    speculation: bool
    review_gates: Mapping[str, bool]


def take_snapshot(orch: Orchestrator) -> EngineSnapshot:
    ctx = orch.ctx
    best = ctx.pool.best()
    seed = ctx.pool.get(ctx.seed_id) if ctx.seed_id in ctx.pool else None
    clients = [("task", ctx.task_llm)]
    if ctx.reflection_llm is not ctx.task_llm:
        clients.append(("reflection", ctx.reflection_llm))
    t = ctx.tally
    return EngineSnapshot(
        run_id=ctx.run_id,
        state=orch.state,
        mode=ctx.config.pipeline.mode,
        policy=ctx.policy.name,
        backend=ctx.backend,
        simulated=ctx.config.uses_sim,
        elapsed_s=ctx.elapsed(),
        pool_version=ctx.pool.version,
        pool_size=len(ctx.pool),
        seed_score=seed.val_mean if seed else None,
        best_score=best.val_mean if best else None,
        best_id=best.artifact_id if best else None,
        in_flight_items=orch.in_flight,
        stages=tuple(
            StageSnapshot(
                name=s.name,
                depth=s.depth,
                capacity=s.capacity,
                busy=s.busy,
                workers=s.workers,
                blocked=s.blocked,
                rate_per_s=s.meter.rate(),
                forwarded=s.stats.forwarded,
                ended=s.stats.ended,
            )
            for s in orch.stages.values()
        ),
        gap_histogram=MappingProxyType(dict(ctx.gap_histogram)),
        staleness=MappingProxyType(dict(ctx.staleness_counts)),
        proposals=t.proposals,
        proposal_attempts=t.proposal_attempts,
        accepted=t.accepted,
        rejected=t.rejected,
        failed=t.failed,
        discarded_stale=t.discarded_stale,
        wasted_tokens=t.wasted_tokens,
        llm=tuple(
            LLMSnapshot(endpoint=name, url=c.base_url, in_flight=c.in_flight, calls=c.calls, errors=c.errors, retries=c.retries)
            for name, c in clients
        ),
        llm_calls=t.llm_calls,
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        budget_spent=MappingProxyType(ctx.budget.counters(ctx.elapsed())),
        budget_limits=MappingProxyType(ctx.budget.limits_dict()),
        budget_exhausted=ctx.budget.exhausted,
        max_gap=getattr(ctx.policy, "max_gap", 0),
        review_pending=orch.review.pending_count,
        speculation=ctx.config.pipeline.speculation,
        review_gates=MappingProxyType(dict(orch.review.enabled)),
    )
