"""Immutable snapshots of a run, sampled by observers (TUI, progress lines, bench, attach,
the control socket, the summary).

build_snapshot() is the only place one is made: from the live orchestrator (cheap, no I/O,
never blocks the engine) or from a stored run (attach to a run another process drives, without
its control socket). Every counter comes from the run's RunState (engine/run/state.py) through
_state_fields(), so the two sources cannot disagree on what the database holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pydantic import ValidationError

from engine.costs.budget import KEYS as BUDGET_KEYS
from engine.config import DEFAULT_MAX_GAP, PipelineConfig
from engine.pipeline.modes import mode_named
from engine.pool import Artifact, Pool
from engine.run.state import ChainState, RunState, artifact_from_row, change_from_row

if TYPE_CHECKING:
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


_EMPTY: Mapping = MappingProxyType({})


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
    # Defaults: a snapshot from an older driver (control socket) lacks them.
    metric_calls: int = 0
    merges_tried: int = 0
    merges_accepted: int = 0
    superseded: int = 0
    patch_retries: int = 0
    tolerant_blocks: int = 0
    filters: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """Program tasks: children each cheap filter turned away, by kind."""
    calls_by_stage: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """LLM calls per stage, a strategy's agents (summarize, navigate, sample, plan...) included."""
    tokens_by_stage: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    """Prompt + completion tokens per stage: what each agent costs, per proposal in the LLM panel."""
    chain_count: int = 0
    """mode chain: chains allowed at once now (fixed at `chains`, or adapting, see chains_min;
    before the first admission sets it, its floor, as admission will)."""
    chains_min: int = 0
    chains_max: int = 0
    """mode chain: the bounds the count moves within (equal when the count is fixed); 0 in other
    modes (and from a stored config this release cannot read), which is how observers tell."""
    chains_running: int = 0
    """mode chain: chains taking a step now (live runs; 0 from a stored run)."""


@dataclass(frozen=True)
class StoredRun:
    """A run as its database rows hold it (Store.fetch_rows, JSON columns decoded)."""

    run_id: str
    row: Mapping[str, Any]
    """Its runs row."""
    artifacts: Sequence[Mapping[str, Any]]
    """Its artifacts rows (read after pool_events, so every artifact a change names is here)."""
    pool_events: Sequence[Mapping[str, Any]]
    """Its pool_events rows: the changelog, which decides the pool's version and best."""


def build_snapshot(source: "Orchestrator | StoredRun") -> EngineSnapshot:
    """The one snapshot builder; see the module docstring."""
    if isinstance(source, StoredRun):
        where, state = _stored_fields(source)
    else:
        where, state = _live_fields(source)
    return EngineSnapshot(**where, **_state_fields(state))


def _state_fields(state: RunState) -> dict[str, Any]:
    """Every snapshot field the stored RunState determines."""
    t, program = state.tally, state.program
    return dict(
        gap_histogram=MappingProxyType(dict(sorted(state.gap_histogram.items()))),
        staleness=MappingProxyType(dict(state.staleness_counts)),
        proposals=t.proposals,
        proposal_attempts=t.proposal_attempts,
        accepted=t.accepted,
        rejected=t.rejected,
        failed=t.failed,
        discarded_stale=t.discarded_stale,
        wasted_tokens=t.wasted_tokens,
        llm_calls=t.llm_calls,
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        metric_calls=t.metric_calls,
        merges_tried=t.merges_tried,
        merges_accepted=t.merges_accepted,
        superseded=t.superseded,
        patch_retries=program.patch_retries,
        tolerant_blocks=program.tolerant_blocks,
        filters=MappingProxyType(dict(program.filter_counts)),
        calls_by_stage=MappingProxyType(dict(sorted(t.calls_by_stage.items()))),
        tokens_by_stage=MappingProxyType(dict(sorted(t.tokens_by_stage.items()))),
    )


def _pool_fields(version: int, size: int, seed: Artifact | None, best: Artifact | None) -> dict[str, Any]:
    return dict(pool_version=version, pool_size=size, seed_score=seed.val_mean if seed else None,
                best_score=best.val_mean if best else None, best_id=best.artifact_id if best else None)


# -- the live run -------------------------------------------------------------------------------


def _live_fields(orch: "Orchestrator") -> tuple[dict[str, Any], RunState]:
    ctx = orch.ctx
    clients = [("task", ctx.task_llm)]
    if ctx.reflection_llm is not ctx.task_llm:
        clients.append(("reflection", ctx.reflection_llm))
    elapsed = ctx.elapsed()
    where = dict(
        run_id=ctx.run_id,
        state=orch.state,
        mode=ctx.config.pipeline.mode,
        policy=ctx.policy.name,
        backend=ctx.backend,
        simulated=ctx.config.uses_sim,
        elapsed_s=elapsed,
        **_pool_fields(ctx.pool.version, len(ctx.pool),
                       ctx.pool.get(ctx.seed_id) if ctx.seed_id in ctx.pool else None, ctx.pool.best()),
        in_flight_items=orch.in_flight,
        stages=tuple(
            StageSnapshot(name=s.name, depth=s.depth, capacity=s.capacity, busy=s.busy, workers=s.workers,
                          blocked=s.blocked, rate_per_s=s.meter.rate(), forwarded=s.stats.forwarded,
                          ended=s.stats.ended)
            for s in orch.stages.values()
        ),
        # One row per server: a stage with several endpoints shows each (task#1, task#2, ...).
        llm=tuple(
            LLMSnapshot(endpoint=name if len(client.endpoints) == 1 else f"{name}#{k}", url=c.base_url,
                        in_flight=c.in_flight, calls=c.calls, errors=c.errors, retries=c.retries)
            for name, client in clients for k, c in enumerate(client.endpoints, start=1)
        ),
        budget_spent=MappingProxyType(ctx.budget.counters(elapsed)),
        budget_limits=MappingProxyType(ctx.budget.limits_dict()),
        budget_exhausted=ctx.budget.exhausted,
        max_gap=getattr(ctx.policy, "max_gap", 0),
        review_pending=orch.review.pending_count,
        speculation=ctx.config.pipeline.speculation,
        review_gates=MappingProxyType(dict(orch.review.enabled)),
        **_chain_fields(ctx.config.pipeline, ctx.state.chain),
        chains_running=orch.proposing if orch.mode.chains else 0,
    )
    return where, ctx.state


# -- a stored run ---------------------------------------------------------------------------------


def _stored_fields(run: StoredRun) -> tuple[dict[str, Any], RunState]:
    """What the database says: no queues, no per-endpoint figures, nothing in flight."""
    row = run.row
    state = RunState.from_columns(row.get("rng_state"), row.get("counters"))
    config = row.get("config") or {}
    pipeline = config.get("pipeline") or {}
    budget_cfg = config.get("budget") or {}
    # The pool a resume would rebuild, so version, seed and best are what the live run says.
    pool = Pool()
    pool.restore([artifact_from_row(a) for a in run.artifacts], [change_from_row(e) for e in run.pool_events])
    policy = str(row.get("policy") or "")
    t = state.tally
    where = dict(
        run_id=run.run_id,
        state=str(row.get("status", "?")),
        mode=str(row.get("mode") or "?"),
        policy=policy or "?",
        backend=str(row.get("backend") or "?"),
        simulated=str(row.get("backend") or "").startswith("simulated"),
        elapsed_s=float(state.budget.get("wall_s", 0.0)),
        **_pool_fields(pool.version, len(pool), next((a for a in pool.artifacts() if a.status == "seed"), None),
                       pool.best()),
        in_flight_items=0,
        stages=(),
        llm=(LLMSnapshot("all", "", 0, t.llm_calls, t.llm_errors, t.llm_retries),),
        budget_spent=MappingProxyType(dict(state.budget)),
        # Saved with the state since issue 11 (a resume may change them); else the stored config's.
        budget_limits=MappingProxyType(dict(state.budget_limits) or {
            k: _limit(budget_cfg.get(f"max_{k}")) for k in (*BUDGET_KEYS, "wall_s")}),
        budget_exhausted=None,
        max_gap=_stored_gap(pipeline, policy),
        review_pending=0,
        speculation=bool(pipeline.get("speculation", False)),
        review_gates=MappingProxyType({}),
        **_chain_fields(_stored_pipeline(pipeline), state.chain),
    )
    return where, state


def _stored_pipeline(pipeline: Mapping[str, Any]) -> PipelineConfig | None:
    """The stored run's pipeline settings as this release reads them; None if it cannot (a
    config from a release with other fields: the snapshot then shows no chain bounds)."""
    try:
        return PipelineConfig.model_validate(pipeline)
    except ValidationError:
        return None


def _chain_fields(pipeline: PipelineConfig | None, chain: ChainState) -> dict[str, int]:
    """The chain count as admission reads it (ChainState.bounded) and its bounds; zeros outside
    mode chain."""
    if pipeline is None or not mode_named(pipeline.mode).chains:
        return dict(chain_count=0, chains_min=0, chains_max=0)
    floor, top = pipeline.chain_floor, pipeline.chains
    return dict(chain_count=chain.bounded(floor, top), chains_min=floor, chains_max=top)


def _limit(value: Any) -> float | None:
    return None if value is None else float(value)


def _stored_gap(pipeline: Mapping[str, Any], policy: str) -> int:
    """The stored run's gap threshold (max_gap unset means the policy's default)."""
    gap = pipeline.get("max_gap")
    return int(gap) if gap is not None else DEFAULT_MAX_GAP.get(policy, 0)
