"""Python API: `evotui.optimize` runs a GEPA-style adapter on evotui's engine.

An adapter has `evaluate(batch, candidate, capture_traces=False)` returning outputs, scores and
(with capture_traces) trajectories, and `make_reflective_dataset(candidate, eval_batch,
components_to_update)` returning {component name: [record dict, ...]}; an optional
`propose_new_texts(candidate, reflective_dataset, components_to_update)` replaces the reflection
LLM. The run is an ordinary evotui run (SQLite database, budgets, `evotui show` / `attach`);
the result carries GEPA's field names. Bad input raises ValueError with the reason.

`strategy` is a name (`evotui strategies`, installed plug-ins included) or an
engine.strategy.Strategy the caller composed; an instance runs under its own name, which the run
records (resuming such a run from the command line needs a strategy of that name installed).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import warnings
from pathlib import Path
from typing import Any, Sequence

from engine.components import NAME, has_header_line
from engine.config import SIM_URL
from engine.run.runner import EngineRun, SetupError
from engine.strategy import Strategy
from engine.strategy.registry import instance_scope
from engine.tasks.adapter_task import AdapterTask, seed_components
from evotui.library.result import OptimizeResult, pareto_front, run_counts
from evotui.control import ControlServer, socket_path


def _check_inputs(seed_candidate: Any, trainset: Any, valset: Any, adapter: Any,
                  max_metric_calls: int | None, max_proposals: int | None) -> None:
    if not isinstance(seed_candidate, dict) or not seed_candidate:
        raise ValueError("seed_candidate must be a non-empty dict of component name -> text")
    for name, text in seed_candidate.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(f"seed_candidate key {name!r}: a component name is letters, digits, '_', '.' or '-'")
        if not isinstance(text, str):
            raise ValueError(f"seed_candidate[{name!r}] is a {type(text).__name__}; component texts must be strings")
        if not text.strip():
            raise ValueError(f"seed_candidate[{name!r}] is empty; give each component a text")
        if has_header_line(text, seed_candidate):
            raise ValueError(f"seed_candidate[{name!r}] holds a line `## [name]` of a component; remove it")
    for label, data in (("trainset", trainset), ("valset", valset)):
        if isinstance(data, (str, bytes)) or not isinstance(data, Sequence) or len(data) == 0:
            raise ValueError(f"{label} must be a non-empty list of examples")
    for method in ("evaluate", "make_reflective_dataset"):
        if not callable(getattr(adapter, method, None)):
            raise ValueError(f"adapter {type(adapter).__name__} has no {method}() method; "
                             "it must follow GEPA's adapter protocol")
    if max_metric_calls is None and max_proposals is None:
        raise ValueError("give a budget: max_metric_calls or max_proposals")


def _layers(reflection_llm: str, model: str | None, api_key_env: str | None, max_metric_calls: int | None,
            max_proposals: int | None, max_wall_s: float | None, mode: str | None, policy: str, strategy: str | None,
            seed: int, minibatch_size: int, config: dict | None) -> list[tuple[str, dict]]:
    url = SIM_URL if reflection_llm == "sim" else reflection_llm
    endpoint: dict = {"url": url}
    if model is not None:
        endpoint["model"] = model
    if api_key_env is not None:
        endpoint["api_key_env"] = api_key_env
    budget = {k: v for k, v in (("max_metric_calls", max_metric_calls), ("max_proposals", max_proposals),
                                ("max_wall_s", max_wall_s)) if v is not None}
    if max_metric_calls is not None:  # gepa.optimize's meaning of the budget (BudgetConfig.metric_calls_rule)
        budget["metric_calls_rule"] = "gepa"
    # The adapter scores; the one LLM is the reflection model (task_llm, which reflection falls back to).
    layer = {"seed": seed, "task_llm": endpoint, "budget": budget,
             # No mode named: evotui's default for the adapter kind (engine/pipeline/modes.py).
             "pipeline": {**({"mode": mode} if mode is not None else {}), "minibatch_size": minibatch_size,
                          **({"policy": policy} if policy != "full" else {})},
             # The adapter kind has no default strategy of its own: GEPA's, unless one is named.
             "strategy": {"name": strategy}}
    return [("evotui.optimize", layer), *([("config", config)] if config else [])]


def _strategy_choice(strategy: Any) -> tuple[str | None, Strategy | None]:
    """(the name the config records, the instance to run or None) for optimize's `strategy`."""
    if strategy is None or isinstance(strategy, str):
        return strategy, None
    if isinstance(strategy, Strategy):
        return strategy.name, strategy
    raise ValueError(f"strategy must be a strategy name (see `evotui strategies`) or an engine.strategy.Strategy, "
                     f"not a {type(strategy).__name__}")


async def optimize_async(seed_candidate: dict[str, str], trainset: Sequence[Any], valset: Sequence[Any], adapter: Any,
                         *, reflection_llm: str = "sim", model: str | None = None, api_key_env: str | None = None,
                         max_metric_calls: int | None = None, max_proposals: int | None = None,
                         max_wall_s: float | None = None, mode: str | None = None, policy: str = "full",
                         strategy: str | Strategy | None = None, db: str | Path = "evotui.db", seed: int = 0,
                         minibatch_size: int = 3, perfect_score: float | None = 1.0, name: str = "adapter",
                         description: str = "", config: dict | None = None,
                         component_types: dict[str, str] | None = None,
                         frozen_regions: dict[str, list[str]] | None = None) -> OptimizeResult:
    """`optimize` inside a running event loop. `component_types` (name -> prompt, tool_description,
    tool_code, agent_config or text) and `frozen_regions` (name -> exact texts every edit keeps)
    type the seed's components as a task.toml's [[component]] blocks do."""
    _check_inputs(seed_candidate, trainset, valset, adapter, max_metric_calls, max_proposals)
    strategy_name, instance = _strategy_choice(strategy)
    own = getattr(adapter, "propose_new_texts", None)
    task = AdapterTask(name=name, description=description, train=list(trainset), val=list(valset),
                       seed_components=seed_components(seed_candidate, component_types, frozen_regions),
                       adapter=adapter,
                       propose_new_texts=own if callable(own) else None,
                       max_score=math.inf if perfect_score is None else float(perfect_score))
    layers = _layers(reflection_llm, model, api_key_env, max_metric_calls, max_proposals, max_wall_s, mode, policy,
                     strategy_name, seed, minibatch_size, config)
    # The run's tasks start inside the scope and keep it, so each build of the name finds the instance.
    with instance_scope(instance) if instance is not None else contextlib.nullcontext():
        return await _optimize(task, layers, Path(db), seed)


async def _optimize(task: AdapterTask, layers: list[tuple[str, dict]], db: Path, seed: int) -> OptimizeResult:
    try:
        run = await EngineRun.create_from_task(task, layers, db)
    except SetupError as exc:
        raise ValueError(str(exc)) from None
    # The control socket, as `evotui run` serves it: `evotui attach` watches and steers the run
    # live, `evotui edit` hot-swaps a component.
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    if not await control.start():
        warnings.warn(f"evotui.optimize: {control.problem}", RuntimeWarning, stacklevel=2)
    try:
        outcome = await run.run()
    finally:
        await control.close()
    if outcome.status == "failed":
        # exit code 2 is bad input (a broken adapter); anything else is the run's own failure.
        error = ValueError if outcome.exit_code == 2 else RuntimeError
        raise error(f"run {run.ctx.run_id} failed: {outcome.reason}")
    return await _result(run, outcome.status, outcome.reason, db, seed)


def optimize(seed_candidate: dict[str, str], trainset: Sequence[Any], valset: Sequence[Any], adapter: Any,
             **options: Any) -> OptimizeResult:
    """Evolve `seed_candidate` (component name -> text) with `adapter`; see the module docstring
    and optimize_async for the options (reflection_llm="sim" or an OpenAI-compatible URL, model,
    max_metric_calls, max_proposals, mode, policy, strategy, db, seed, ...)."""
    return asyncio.run(optimize_async(seed_candidate, trainset, valset, adapter, **options))


async def _result(run: EngineRun, status: str, reason: str, db: Path, seed: int) -> OptimizeResult:
    pool = run.ctx.pool
    arts = sorted((a for a in pool.artifacts() if a.status in ("seed", "confirmed")),
                  key=lambda a: (a.status != "seed", a.created_version, a.artifact_id))
    index = {a.artifact_id: i for i, a in enumerate(arts)}
    val_ids = run.ctx.task.val_ids
    subscores = [{n: a.val_scores[v] for n, v in enumerate(val_ids)} for a in arts]
    ids = [a.artifact_id for a in arts]
    discovery, full_evals = await run_counts(db, run.ctx.run_id, ids, len(val_ids))
    return OptimizeResult(
        candidates=[{c.name: c.text for c in a.parts} for a in arts],
        parents=[[index.get(p) for p in a.parent_ids] or [None] for a in arts],
        val_aggregate_scores=[a.val_mean for a in arts],
        val_subscores=subscores, per_val_instance_best_candidates=pareto_front(subscores),
        discovery_eval_counts=discovery, total_metric_calls=run.ctx.tally.metric_calls,
        num_full_val_evals=full_evals, run_dir=str(db.resolve().parent), seed=seed,
        run_id=run.ctx.run_id, db=str(db), status=status, stop_reason=reason, artifact_ids=ids,
    )
