"""`evotui tune`: the tuning gap of one program (EvoTrace §5.4, B.9).

The candidate's numeric knobs (engine/trace/knobs.py; optionally chosen and bounded by one LLM
call, engine/trace/tune_rank.py) are rewritten into a PARAMS block, and optuna's TPE sampler
(seeded) searches them with `trials` sandboxed evaluations: the first third (8 of 24) random
start-up points, evaluated side by side, then one guided point at a time. Every evaluation goes
through engine/sandbox exactly as the run's evaluate stage does: the task's evaluator, mode,
cascade, program file name and limits (the task's [program] settings with the run's overrides),
the run's key variables dropped. Always the local sandbox, also for a run that evaluated on Ray
([evaluator] backend = "ray" runs the same sandbox there).

Before the search the rewritten program is evaluated once with the evolved values (the rewrite
check: it must reproduce the evolved score, else the rewrite changed the program and the tuning
gap would be meaningless). That evaluation is trial 0 of the study (known to TPE, not counted in
`trials`). The report pairs the evolved score with the tuned ceiling, the best of trial 0 and the
`trials` evaluations (so it is never below the evolved program), as the paper recommends, and the
best of the searched trials alone.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.sandbox import Sandbox
from engine.trace import knobs as knobs_mod
from engine.trace import tune_rank
from engine.trace.errors import TraceError
from engine.trace.llm import Choice, endpoint_config, make_client, secret_vars

TRIALS = 24
# The rewritten program must reproduce the evolved score within this (relative) tolerance.
REWRITE_TOL = 1e-9
CANDIDATES = 24
"""Literals offered to the LLM ranking (it picks at most knobs.MAX_KNOBS)."""


@dataclass
class Target:
    run_id: str
    run_config: dict[str, Any]
    artifact_id: str
    text: str
    recorded: float | None
    run_best: float | None
    task: Any


def startup_of(trials: int) -> int:
    """Random start-up trials: 8 of 24, a third in general (at least 1)."""
    return max(1, min(trials, round(trials / 3)))


async def load_target(db: Path, run_id: str, artifact_id: str) -> Target:
    from engine.config import ConfigError
    from engine.run.admin import AdminError, find_artifact
    from engine.tasks.loader import load_any_task, with_program_settings
    from engine.tasks.prompt_task import TaskError

    try:
        found = await find_artifact(db, run_id, artifact_id, writable=False)
    except AdminError as exc:
        raise TraceError(str(exc)) from None
    task_path = found.run.get("task_path")
    if not task_path or not Path(task_path).is_dir():
        raise TraceError(f"the task folder {task_path!r} of run {run_id} is not on this machine")
    config = found.run.get("config") or {}
    try:
        task = with_program_settings(load_any_task(task_path), config.get("program") or {})
    except (TaskError, ConfigError) as exc:
        raise TraceError(f"cannot load the task at {task_path}: {exc}") from None
    if task.kind != "program":
        raise TraceError(f"tune tunes the numeric constants of programs; run {run_id} is a {task.kind} task")
    summary = found.run.get("summary") or {}
    return Target(run_id=run_id, run_config=config, artifact_id=artifact_id, text=found.artifact.text,
                  recorded=found.artifact.val_mean, run_best=summary.get("best_score"), task=task)


async def choose_knobs(target: Target, rank: Choice | None) -> tuple[list[knobs_mod.Knob], dict[str, Any]]:
    """The knobs (heuristic order, or the LLM's pick) and a note on how they were chosen."""
    task = target.task
    candidates = knobs_mod.find_knobs(target.text, task.language, limit=CANDIDATES)
    if not candidates:
        raise TraceError(f"candidate {target.artifact_id} has no numeric constants to tune (integers beyond "
                         "+-2 or floats, outside shapes and indices); nothing was evaluated or written")
    if rank is None:
        return candidates[:knobs_mod.MAX_KNOBS], {"ranked_by": "heuristic", "candidates": len(candidates)}
    from engine.llm.errors import LLMError
    from engine.tasks.sim_behaviours import all_behaviours

    cfg = endpoint_config(target.run_config, "reflection_llm", rank)
    client = make_client(cfg, target.run_config, "tune", behaviours=tuple(all_behaviours()))
    try:
        res = await client.chat(tune_rank.messages(target.text, candidates, task.language.fence), stage="analyze",
                                temperature=0.0)
    except LLMError as exc:
        raise TraceError(f"knob ranking failed at {cfg.model}: {exc}") from None
    finally:
        await client.aclose()
    picked = tune_rank.parse(res.text, candidates)
    if not picked:
        return candidates[:knobs_mod.MAX_KNOBS], {"ranked_by": "heuristic (the LLM's answer named no candidate)",
                                                  "model": cfg.model, "candidates": len(candidates)}
    return tune_rank.apply(candidates, picked), {"ranked_by": "llm", "model": cfg.model, "candidates": len(candidates)}


class Evaluator:
    """The run's evaluation of a program text: the sandbox with the task's settings."""

    def __init__(self, task: Any, run_config: dict[str, Any]) -> None:
        s = task.settings
        self.task = task
        self.sandbox = Sandbox(s.limits(), concurrency=s.eval_concurrency, secret_vars=secret_vars(run_config))

    async def score(self, text: str) -> tuple[float | None, str]:
        t, s = self.task, self.task.settings
        ev = await self.sandbox.evaluate(t.evaluator, text, mode=t.sandbox_mode, cascade=s.cascade,
                                         thresholds=s.cascade_thresholds, program_name=t.program_name)
        if not ev.ok or ev.score is None or not math.isfinite(ev.score):
            return None, ev.reason or "no score"
        return float(ev.score), ""


async def tune(target: Target, *, trials: int = TRIALS, seed: int = 0, rank: Choice | None = None) -> dict[str, Any]:
    import optuna

    if trials < 1:
        raise TraceError("--trials must be at least 1")
    knobs, how = await choose_knobs(target, rank)
    ev = Evaluator(target.task, target.run_config)
    base_text = knobs_mod.rewrite(target.text, knobs)
    check, why = await ev.score(base_text)
    if check is None:
        raise TraceError(f"the rewritten program fails to evaluate ({why}); the PARAMS rewrite broke it")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    startup = startup_of(trials)
    # The rewrite check is the evolved point: the study knows it (it counts as one completed
    # trial, hence startup + 1) but it spends none of the `trials` evaluations.
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup + 1)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    dists = {k.name: (optuna.distributions.IntDistribution(int(k.low), int(k.high), log=k.log) if k.kind == "int"
                      else optuna.distributions.FloatDistribution(k.low, k.high, log=k.log)) for k in knobs}
    study.add_trial(optuna.trial.create_trial(params={k.name: k.cast(k.default) for k in knobs}, distributions=dists,
                                              value=check))

    def ask() -> tuple[Any, dict[str, float]]:
        trial = study.ask()
        values = {k.name: (trial.suggest_int(k.name, int(k.low), int(k.high), log=k.log) if k.kind == "int"
                           else trial.suggest_float(k.name, k.low, k.high, log=k.log)) for k in knobs}
        return trial, values

    rows: list[dict[str, Any]] = []

    async def run(trial: Any, values: dict[str, float], phase: str) -> None:
        score, why = await ev.score(knobs_mod.rewrite(target.text, knobs, values))
        if score is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, score)
        rows.append({"trial": trial.number, "phase": phase, "score": score, "error": why or None, "values": values})

    # Start-up points do not depend on results: asked together, evaluated side by side.
    first = [ask() for _ in range(startup)]
    await asyncio.gather(*(run(t, v, "random") for t, v in first))
    for _ in range(trials - startup):
        t, v = ask()
        await run(t, v, "tpe")
    rows.sort(key=lambda r: r["trial"])
    scored = [r for r in rows if r["score"] is not None]
    best = max(scored, key=lambda r: (r["score"], -r["trial"])) if scored else None
    evolved = target.recorded
    # The ceiling is the best program of the search, the evolved values included (trial 0).
    if best is None or best["score"] <= check:
        best = {"trial": 0, "score": check, "values": {k.name: k.default for k in knobs}}
    ceiling = best["score"]
    tuned_values = best["values"]
    return {
        "run_id": target.run_id, "candidate_id": target.artifact_id, "task": target.task.name,
        "evolved_score": evolved, "rewrite_check": check,
        "rewrite_ok": evolved is None or abs(check - evolved) <= REWRITE_TOL * max(1.0, abs(evolved)),
        "tuned_ceiling": ceiling, "gain": None if ceiling is None or evolved is None else ceiling - evolved,
        "run_best": target.run_best, "trials": trials, "startup_trials": startup, "seed": seed,
        "failed_trials": sum(r["score"] is None for r in rows), "best_trial": best["trial"] if best else None,
        "knobs": [k.as_dict() | {"tuned": knobs_mod.Knob.cast(k, tuned_values[k.name])} for k in knobs],
        "chosen": how, "trial_rows": rows,
        "best_trial_score": max((r["score"] for r in scored), default=None),
        "tuned_program": knobs_mod.rewrite(target.text, knobs, tuned_values),
    }
