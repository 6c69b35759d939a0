"""Set-up of a run, before and around EngineRun: the checks that refuse a bad combination before
any database file exists, opening the store, the run's services (LLM clients, a managed local
server, the simulator) gathered in a RunContext, and a stored run's state restored for resume.

Separate from engine.run.runner so the run's lifecycle (EngineRun) reads on its own; every problem
found here is a SetupError, whose message names the problem and the fix.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import httpx

from engine.capabilities.program_speculation import speculation_refusal_for
from engine.costs.budget import Budget
from engine.config import LOCAL_URL, SIM_URL, EndpointConfig, RunConfig
from engine.context import CallSink, RunContext
from engine.events import EventBus
from engine.items import WorkItem
from engine.llm.client import LLMClient
from engine.llm.errors import LLMError
from engine.llm.local import LocalServerError, client_endpoint, start_for_config
from engine.llm.redact import redact_url
from engine.llm.routing import RoutedClient
from engine.llm.sim import sim_transport
from engine.pipeline.modes import mode_named
from engine.pipeline.spec import PipelineSpec
from engine.pool import Pool
from engine.run.state import RunState, artifact_from_row, change_from_row
from engine.pricing import PriceError
from engine.selection.pareto import MinibatchSampler
from engine.costs.spend import SpendMeter
from engine.selection.val_order import ValidationOrder
from engine.stages.kinds import search_params
from engine.staleness import make_policy
from engine.store.store import Store, StoreError
from engine.strategy import UnknownStrategy, build as build_strategy
from engine.tasks.prompt_task import PromptTask
from engine.tasks.sim_behaviours import all_behaviours


class SetupError(Exception):
    """The run cannot start; message is one line naming the problem and the fix."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def check_stage_names(config: RunConfig, spec: PipelineSpec, kind: str, strategy: str, resumed: bool) -> list[str]:
    """[pipeline] workers, min_workers and max_workers name stages of this run's pipeline, which its
    task kind and strategy declare (known once the handlers exist, hence checked here and not in the
    configuration). A new run with another name is refused (ValueError); a resumed one started
    under the earlier fixed list of names, where such a key had no effect: it gets a warning."""
    stages = (*spec.names, *((spec.reflect.name,) if spec.reflect is not None else ()))
    unknown = [(table, key) for table, keys in config.pipeline.named_stages().items() for key in keys
               if key not in stages]
    where = f"this {kind} task with strategy {strategy} has {', '.join(stages)}"
    if unknown and not resumed:
        table, key = unknown[0]
        raise ValueError(f"[pipeline] {table} names stage {key!r}, which this run does not have; {where} "
                         f"(remove {key!r} or name one of those)")
    return [f"[pipeline] {table} names stage {key!r}, which this run does not have ({where}); it has no effect"
            for table, key in unknown]


def check_combination(config: RunConfig, task) -> None:
    """The strategy exists and the mode runs it on this task kind (before any database file)."""
    mode = mode_named(config.pipeline.mode)
    if task.kind not in mode.kinds:
        raise SetupError(f"task {task.name}: mode {mode.name} is for {' and '.join(sorted(mode.kinds))} tasks; "
                         f"{task.kind} tasks run in mode async, sync or pxn")
    if config.pipeline.speculation:
        why = speculation_refusal_for(config, task)
        if why:
            raise SetupError(f"task {task.name}: {why}")
    if config.pipeline.speculative_rollout is not None and task.kind != "prompt":
        raise SetupError(f"task {task.name}: speculative_rollout releases a prompt's minibatch rollout early; a "
                         f"{task.kind} task has no per-example rollout (remove [pipeline] speculative_rollout)")
    try:
        strategy = build_strategy(config.strategy.name, task.kind, search_params(task, config))
    except UnknownStrategy as exc:
        raise SetupError(str(exc)) from None
    if mode.chains and task.kind in ("prompt", "adapter") and not strategy.acceptance.gated:
        raise SetupError(f"mode {mode.name} hands each step on at the minibatch gate; strategy {strategy.name} "
                         "has no gate (use --strategy gepa, or --mode async)")


async def open_store(db_path: Path, create: bool) -> Store:
    try:
        return await Store.open(db_path, create=create)
    except StoreError as exc:
        raise SetupError(str(exc)) from None


def _api_key_check(ep: EndpointConfig) -> None:
    if ep.api_key_env and not os.environ.get(ep.api_key_env):
        raise SetupError(f"environment variable {ep.api_key_env} (api_key_env) is not set; export it or remove api_key_env")


def spend_meter(config: RunConfig) -> SpendMeter:
    """The run's price table and endpoints (a bad --prices file is a SetupError)."""
    try:
        return SpendMeter.for_config(config)
    except PriceError as exc:
        raise SetupError(f"{exc}; fix it or drop --prices") from None


async def build_context(run_id: str, config: RunConfig, task: PromptTask, store: Store) -> tuple[RunContext, object]:
    sim_state = None
    try:
        meter = spend_meter(config)
    except SetupError:
        await store.close()
        raise
    transport: httpx.AsyncBaseTransport | None = None
    if config.uses_sim:
        transport, sim_state = sim_transport(config.sim, behaviours=all_behaviours())

    sink = CallSink()
    try:
        local = await start_for_config(config)
    except LocalServerError as exc:
        await store.close()
        raise SetupError(str(exc), exit_code=exc.exit_code) from None

    clients: list[LLMClient] = []

    def make(ep: EndpointConfig, name: str) -> LLMClient:
        _api_key_check(ep)
        salt = str(config.seed)  # simulated replies are a function of the run seed (engine/llm/draws.py)
        if ep.url == LOCAL_URL:
            client = LLMClient(client_endpoint(ep, local), name=name, on_call=sink, draw_salt=salt)
        elif ep.url == SIM_URL:
            client = LLMClient(ep, name=name, transport=transport, on_call=sink, draw_salt=salt)  # base: SIM_BASE_URL
        elif ep.endpoints:
            client = RoutedClient(ep, name=name, on_call=sink)
        else:
            client = LLMClient(ep, name=name, on_call=sink, draw_salt=salt)
        clients.append(client)
        return client

    try:
        task_llm = make(config.task_llm, "task")
        reflection_llm = task_llm if config.reflection_llm is None else make(config.reflection, "reflection")
        for client in clients:
            await client.check()
    except (LLMError, SetupError) as exc:
        for client in clients:
            await client.aclose()
        await store.close()
        if local is not None:
            local.stop()
        code = exc.exit_code if isinstance(exc, SetupError) else 3
        origin = endpoint_origin(task, config) if isinstance(exc, LLMError) and exc.kind == "connect" else ""
        raise SetupError(str(exc) + origin, exit_code=code) from None
    rng = random.Random(config.seed)
    backend = f"simulated:{config.sim.profile}" if config.uses_sim else redact_url(config.task_llm.url)
    if local is not None:
        backend = f"local:{local.model.name}"
    ctx = RunContext(
        run_id=run_id,
        config=config,
        task=task,
        pool=Pool(),
        budget=Budget(config.budget, meter=meter),
        store=store,
        bus=EventBus(),
        task_llm=task_llm,
        reflection_llm=reflection_llm,
        policy=make_policy(config.pipeline.policy, config.pipeline.gap_for(config.pipeline.policy)),
        rng=rng,
        sampler=MinibatchSampler(task.train_ids, config.pipeline.minibatch_size, random.Random(config.seed + 1)),
        backend=backend,
        call_sink=sink,
        local_server=local,
        val_order=ValidationOrder(task.val_ids, config.pipeline.reorder_k),
    )
    ctx.setup_warnings.extend(n for client in clients for n in getattr(client, "notices", ()))
    return ctx, sim_state


def endpoint_origin(task, config: RunConfig) -> str:
    """Where an unreachable endpoint came from when the task's own files named it (an OpenEvolve
    config.yaml's llm.api_base, a task.toml [defaults]), and the two ways out."""
    named = ((getattr(task, "defaults", None) or {}).get("task_llm") or {}).get("url")
    if not named or named.rstrip("/") != config.task_llm.url.rstrip("/"):
        return ""
    folder = Path(getattr(task, "path", "."))
    where = (f"{folder / 'config.yaml'} (llm.api_base)" if getattr(task, "format", "") == "openevolve"
             else f"{folder / 'task.toml'} ([defaults.task_llm] url)")
    return (f"; that endpoint comes from {where}: run on the simulated backend with --llm sim, or name "
            "another server with --llm-url URL --model NAME")


def restore_stored_run(ctx: RunContext, record) -> list[WorkItem]:
    """Pool, run state and budget from the store; returns the interrupted items to re-enqueue."""
    artifacts = [artifact_from_row(a) for a in record.artifacts]
    ctx.pool.restore(artifacts, [change_from_row(e) for e in record.pool_events])
    seed = next((a for a in artifacts if a.status == "seed"), None)
    ctx.seed_id = seed.artifact_id if seed else ""
    # One deserializer for both columns, this release's and the previous one's.
    state = RunState.from_columns(record.rng_state, record.counters)
    ctx.restore_state(state)
    tally = state.tally
    # LLM calls committed after the last counters update still count: take them from their rows.
    counts = record.counts or {}
    tally.llm_calls = max(tally.llm_calls, int(counts.get("llm_calls", 0)))
    tally.prompt_tokens = max(tally.prompt_tokens, int(counts.get("prompt_tokens", 0)))
    tally.completion_tokens = max(tally.completion_tokens, int(counts.get("completion_tokens", 0)))
    spent = dict(state.budget)
    # Proposals are charged with a row that says so; the counters, written later, can only lag
    # (runs from before schema v3 have no such rows: their counters stand).
    charged = counts.get("proposals") or {}
    attempts = sum(charged.values())
    spent["proposals"] = max(float(spent.get("proposals", 0)), attempts)
    tally.proposal_attempts = max(tally.proposal_attempts, attempts)
    tally.proposals = max(tally.proposals, int(charged.get("made", 0)))
    spent["llm_calls"] = max(float(spent.get("llm_calls", 0)), tally.llm_calls)
    spent["tokens"] = max(float(spent.get("tokens", 0)), tally.prompt_tokens + tally.completion_tokens)
    # Dollars and GPU-seconds: the stored calls at today's prices (exact across kills).
    meter = spend_meter(ctx.config)  # fresh: only the stored calls count
    meter.restore(counts.get("call_groups") or [])
    spent["usd"], spent["gpu_s"] = meter.usd, meter.gpu_s
    ctx.budget = Budget(ctx.config.budget, spent, meter)
    best = ctx.pool.best()
    if best is not None:
        ctx.best_history.append((0.0, best.val_mean))
    return [WorkItem.from_row(row) for row in record.open_items]
