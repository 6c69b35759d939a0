"""Re-evaluate a candidate on demand (`steer reeval`): its score on the task's held-out set or on K
more examples than its validation saw, with the run's own task model (prompt tasks) or the task's
held-out evaluator in the sandbox (program tasks).

The request is a `reeval` act (live.take); the outcome a `reevaluated` act whose detail holds the
mean, the count and the per-example scores, so the result is in the audit trail and the export's
reach without touching the pool: a re-evaluation informs the operator, it does not re-rank.
Runs on the driver's loop; its LLM calls are recorded (stage "evaluate") and charged like any.
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import TYPE_CHECKING, Any

from engine.items import current_item
from engine.llm.errors import LLMError
from engine.steering.acts import Act, SteerError

if TYPE_CHECKING:
    from engine.context import RunContext

CONCURRENCY = 8


def examples_for(ctx: RunContext, act: Act) -> tuple[str, list[dict]]:
    """(split name, the examples) of a prompt task's re-evaluation; SteerError if it has none."""
    task = ctx.task
    if act.detail.get("heldout"):
        if not task.heldout:
            raise SteerError(f"task {task.name} has no held-out split (heldout.jsonl, or heldout = \"...\" in "
                             "task.toml); re-evaluate on --examples K instead")
        return "heldout", list(task.heldout)
    k = int(act.detail["examples"])
    seen = set(ctx.pool.get(str(act.target)).val_scores)
    unseen = [ex for ex in task.train if ex["id"] not in seen]
    if k > len(unseen):
        raise SteerError(f"task {task.name} has {len(unseen)} training examples the candidate was not validated on; "
                         f"ask for at most {len(unseen)}")
    return "train", random.Random(act.act_id).sample(unseen, k)  # seeded by the act: the same on a replay


def check_possible(ctx: RunContext, act_fields: dict[str, Any], target: str) -> None:
    """Refuse before anything is written when the task cannot do what is asked."""
    task = ctx.task
    if task.kind == "program":
        if act_fields["detail"].get("examples") is not None:
            raise SteerError("a program task is scored by its evaluator, not on examples; re-evaluate with --heldout "
                             "(the task's [heldout] evaluator)")
        if getattr(task, "heldout_evaluator", None) is None:
            raise SteerError(f"task {task.name} has no held-out evaluator ([heldout] evaluator in task.toml, or "
                             "heldout_evaluator.py beside it)")
        return
    if task.kind != "prompt":
        raise SteerError(f"re-evaluation is for prompt and program tasks; this run's task is a {task.kind} task")
    examples_for(ctx, Act(act_id=0, act="reeval", by="check", target=target, detail=act_fields["detail"]))


async def reevaluate(ctx: RunContext, act: Act) -> dict[str, Any]:
    """The `reevaluated` detail for request `act` (mean, n, scores); SteerError if it could not run."""
    text = ctx.pool.get(str(act.target)).text
    if ctx.task.kind == "program":
        return await _program(ctx, act, text)
    split, examples = examples_for(ctx, act)
    slots = asyncio.Semaphore(CONCURRENCY)
    current_item.set(None)

    async def one(ex: dict) -> float:
        async with slots:
            res = await ctx.task_llm.chat([{"role": "system", "content": text},
                                           {"role": "user", "content": ctx.task.user_message(ex)}], stage="evaluate")
        ctx.tally.metric_calls += 1
        ctx.budget.charge("metric_calls", 1)
        return float(ctx.task.score(ex, res.text).score)

    try:
        scores = await asyncio.gather(*(one(ex) for ex in examples))
    except LLMError as exc:
        raise SteerError(f"the re-evaluation of {act.target} stopped: task model error {exc.kind}") from None
    by_id = {str(ex["id"]): s for ex, s in zip(examples, scores)}
    return _detail(act, split, by_id)


async def _program(ctx: RunContext, act: Act, text: str) -> dict[str, Any]:
    from engine.sandbox import Sandbox

    task, s = ctx.task, ctx.task.settings
    sandbox = Sandbox(s.limits(), concurrency=1, secret_vars=_secret_vars(ctx))
    ev = await sandbox.evaluate(task.heldout_evaluator, text, mode=task.sandbox_mode, program_name=task.program_name)
    if not ev.ok or ev.score is None or not math.isfinite(ev.score):
        raise SteerError(f"the held-out evaluator failed on {act.target}: {ev.reason or 'no score'}")
    return _detail(act, "heldout", {"combined_score": float(ev.score)})


def _secret_vars(ctx: RunContext) -> frozenset[str]:
    return frozenset(ep.api_key_env for ep in (ctx.config.task_llm, ctx.config.reflection_llm)
                     if ep is not None and getattr(ep, "api_key_env", None))


def _detail(act: Act, split: str, scores: dict[str, float]) -> dict[str, Any]:
    mean = sum(scores.values()) / len(scores)
    art_split = "the held-out set" if split == "heldout" else f"{len(scores)} more training examples"
    return {"request": act.act_id, "split": split, "n": len(scores), "mean": mean, "scores": scores,
            "summary": f"{mean:.4f} on {art_split}"}
