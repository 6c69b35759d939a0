"""Held-out check (EvoTrace §5 / B.7): re-score the run's best-so-far chain on what the run never
saw, and label the run aligned / mild overfit / severe overfit.

Where the held-out score comes from:
- program tasks: the task's held-out evaluator ([heldout] evaluator in task.toml, default
  heldout_evaluator.py), in the sandbox with the run's settings (the same mode, limits and
  program file name as its evaluator);
- prompt tasks: the held-out split (heldout = "heldout.jsonl", default that file), each example
  answered by the run's task model with the candidate as system prompt (the run's rollout) and
  scored by the task's metric; the mean over the split. Answers are cached in the database
  (keyed by the prompt, the model and the example), so a second analyze asks the model nothing.

Labels. Let G be the public gain along the chain (best's recorded score minus the seed's) and H
the held-out gain (best's held-out score minus the seed's), r = H / G:
- aligned: r >= 0.5, the held-out score keeps at least half of the public gain;
- mild overfit: 0 <= r < 0.5, it keeps less than half but does not fall below the seed;
- severe overfit: r < 0, the held-out score falls below the seed's despite the public gain (the
  paper's "lost rating points despite a positive public score change"); also when the best fails
  the held-out evaluation outright;
- no gain: G <= 0, nothing to generalise.
The paper labels its ALE runs the same three ways but prints no numeric boundary; the 0.5 and 0
above are ours.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from pathlib import Path
from typing import Any

from engine.trace.analyze.lineage import analyze as lineage_of
from engine.trace.errors import TraceError
from engine.trace.model import Trace

ALIGNED_MIN = 0.5
MILD_MIN = 0.0
CONCURRENCY = 8
CACHE_MODEL_PREFIX = "heldout:"


def label(public_gain: float, heldout_gain: float | None) -> str:
    if public_gain <= 0:
        return "no gain"
    if heldout_gain is None:
        return "severe overfit"
    r = heldout_gain / public_gain
    return "aligned" if r >= ALIGNED_MIN else "mild overfit" if r >= MILD_MIN else "severe overfit"


def _task_of(trace: Trace) -> Any:
    from engine.config import ConfigError
    from engine.tasks.loader import load_any_task, with_program_settings
    from engine.tasks.prompt_task import TaskError

    env = trace.replay_environments[0] if trace.replay_environments else {}
    path = env.get("task_path") or trace.run.get("task_path")
    if not path or not Path(path).is_dir():
        raise TraceError(f"the task folder {path!r} is not on this machine")
    try:
        task = load_any_task(path)
        if task.kind == "program":
            task = with_program_settings(task, (trace.run.get("config") or {}).get("program") or {})
    except (TaskError, ConfigError) as exc:
        raise TraceError(f"cannot load the task at {path}: {exc}") from None
    return task


async def _program_scores(task: Any, texts: list[str], run_config: dict[str, Any]) -> list[tuple[float | None, str]]:
    from engine.sandbox import Sandbox
    from engine.trace.llm import secret_vars

    s = task.settings
    sandbox = Sandbox(s.limits(), concurrency=s.eval_concurrency, secret_vars=secret_vars(run_config))

    async def one(text: str) -> tuple[float | None, str]:
        ev = await sandbox.evaluate(task.heldout_evaluator, text, mode=task.sandbox_mode, program_name=task.program_name)
        if not ev.ok or ev.score is None or not math.isfinite(ev.score):
            return None, ev.reason or "no score"
        return float(ev.score), str(ev.feedback.get("feedback", ""))[:200]

    return list(await asyncio.gather(*(one(t) for t in texts)))


def _cache_key(model: str, prompt: str, example: dict, user: str) -> str:
    h = hashlib.sha256()
    for part in ("heldout-v1", model, prompt, str(example["id"]), user):
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()


async def _prompt_scores(store, task: Any, texts: list[str], make_client, model: str,
                         counts: dict[str, int]) -> list[tuple[float | None, str]]:
    from engine.llm.errors import LLMError

    plan = [(ti, ex, task.user_message(ex)) for ti in range(len(texts)) for ex in task.heldout]
    keys = [_cache_key(model, texts[ti], ex, user) for ti, ex, user in plan]
    cached = await store.judge_labels(sorted(set(keys)))
    scores: dict[str, float] = {k: float(v[0]) for k, v in cached.items() if v}
    counts["cached"] = sum(k in scores for k in keys)
    todo = [(k, ti, ex, user) for k, (ti, ex, user) in zip(keys, plan) if k not in scores]
    if todo:
        client = make_client()
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one(key: str, ti: int, ex: dict, user: str) -> None:
            async with sem:
                try:
                    res = await client.chat([{"role": "system", "content": texts[ti]}, {"role": "user", "content": user}],
                                            stage="rollout")
                except LLMError as exc:
                    if exc.fatal:
                        raise TraceError(f"held-out rollouts: the task endpoint is unusable: {exc}") from None
                    counts["failed"] += 1
                    return
            counts["calls"] += 1
            score = task.score(ex, res.text).score
            scores[key] = score
            store.put_judge_labels(key, model=CACHE_MODEL_PREFIX + model, labels=[repr(score)], invalid_answers=0,
                                   created_at=time.time())

        try:
            await asyncio.gather(*(one(*t) for t in todo))
        finally:
            await client.aclose()
        await store.flush()
    out = []
    n = len(task.heldout)
    for ti in range(len(texts)):
        got = [scores[k] for k in keys[ti * n:(ti + 1) * n] if k in scores]
        out.append((sum(got) / len(got), f"{len(got)} of {n} examples") if got else (None, "no example scored"))
    return out


async def analyze(store, trace: Trace, *, llm_ok: bool, choice) -> dict[str, Any]:
    try:
        task = _task_of(trace)
    except TraceError as exc:
        return {"available": False, "reason": str(exc)}
    lin = lineage_of(trace)
    if lin.get("best_id") is None:
        return {"available": False, "reason": "no scored candidates"}
    by_id = trace.by_id()
    chain = [t for t in lin["timeline"] if t["score"] is not None]
    texts = [by_id[t["candidate_id"]]["source"] or "" for t in chain]
    counts = {"calls": 0, "cached": 0, "failed": 0}
    if task.kind == "program":
        if task.heldout_evaluator is None:
            return {"available": False, "reason": f"task {task.name} declares no held-out evaluator "
                                                  "([heldout] evaluator in task.toml)"}
        source = str(task.heldout_evaluator)
        scored = await _program_scores(task, texts, trace.run.get("config") or {})
    else:
        if not task.heldout:
            return {"available": False, "reason": f"task {task.name} declares no held-out split (heldout = ... in task.toml)"}
        if not llm_ok:
            return {"available": False, "reason": "held-out rollouts need LLM calls (left out with --no-judge)"}
        from engine.tasks.sim_behaviours import all_behaviours
        from engine.trace.llm import Choice, endpoint_config, make_client

        run_config = trace.run.get("config") or {}
        cfg = endpoint_config(run_config, "task_llm", Choice(sim=choice.sim))
        source = f"{len(task.heldout)} held-out examples, task model {cfg.model}"
        scored = await _prompt_scores(store, task, texts,
                                      lambda: make_client(cfg, run_config, "heldout", behaviours=tuple(all_behaviours())),
                                      cfg.model, counts)
    steps = []
    for t, (held, note) in zip(chain, scored):
        steps.append({"proposal": t["proposal"], "candidate_id": t["candidate_id"], "public": t["score"],
                      "heldout": held, "note": note})
    for prev, cur in zip(steps, steps[1:]):
        cur["public_delta"] = cur["public"] - prev["public"]
        cur["heldout_delta"] = None if cur["heldout"] is None or prev["heldout"] is None else cur["heldout"] - prev["heldout"]
    seed, best = steps[0], steps[-1]
    public_gain = best["public"] - seed["public"]
    heldout_gain = None if best["heldout"] is None or seed["heldout"] is None else best["heldout"] - seed["heldout"]
    peak = max((s for s in steps if s["heldout"] is not None), key=lambda s: s["heldout"], default=None)
    return {
        "available": True, "source": source, "kind": task.kind, "chain": steps,
        "public_gain": public_gain, "heldout_gain": heldout_gain,
        "retained": None if heldout_gain is None or public_gain <= 0 else heldout_gain / public_gain,
        "label": "seed fails the held-out check" if seed["heldout"] is None else label(public_gain, heldout_gain),
        "steps_disagreeing": sum(1 for s in steps[1:] if s.get("heldout_delta") is not None and s["heldout_delta"] < 0),
        "heldout_peak": None if peak is None else {"candidate_id": peak["candidate_id"], "heldout": peak["heldout"]},
        "llm_calls": counts["calls"], "cached": counts["cached"], "failed_calls": counts["failed"],
        "thresholds": {"aligned": f"retained >= {ALIGNED_MIN}", "mild overfit": f"{MILD_MIN} <= retained < {ALIGNED_MIN}",
                       "severe overfit": f"retained < {MILD_MIN} or the best fails the held-out check"},
    }
