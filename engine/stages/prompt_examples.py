"""A prompt on examples: run a candidate prompt on one example with the task model and score
the output (the prompt kind's rollout, gate and validation calls all come through here)."""

from __future__ import annotations

import asyncio

from engine.context import CallFailed, FatalRunError, RunContext, stop_if_fatal
from engine.items import current_item
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.stages.answers import gather_cancelling
from engine.tasks.prompt_task import TaskError


async def run_example(ctx: RunContext, prompt_text: str, example_id: str, stage: str) -> dict:
    """Run a candidate prompt on one example with the task model and score the output."""
    example = ctx.task.example(example_id)
    user = ctx.task.user_message(example)
    note = ""
    try:
        res = await ctx.task_llm.chat(
            [{"role": "system", "content": prompt_text}, {"role": "user", "content": user}], stage=stage,
            shrink=middle_out,
        )
        output = res.text
        if res.finish_reason == "length":
            note = " (the answer was cut off at max_tokens)"
    except LLMError as exc:
        stop_if_fatal(exc)
        raise CallFailed(f"LLM error in {stage} on example {example_id}: {exc.kind}") from None
    try:
        result = ctx.task.score(example, output)
    except TaskError as exc:
        raise FatalRunError(str(exc), exit_code=2) from None
    ctx.tally.metric_calls += 1
    ctx.budget.charge("metric_calls", 1, ctx.reservations.get(current_item.get() or ""))
    return {
        "example_id": example_id,
        "input": user,
        "output": output,
        "score": result.score,
        "feedback": result.feedback + note,
    }


async def run_examples(ctx: RunContext, prompt_text: str, example_ids: list[str], stage: str,
                       width: int | None = None) -> list[dict]:
    """All examples at once (at most `width` at a time if given); the first failure cancels
    the rest (their answers are no use)."""
    if width is not None and width < len(example_ids):
        slots = asyncio.Semaphore(width)

        async def one(ex: str) -> dict:
            async with slots:
                return await run_example(ctx, prompt_text, ex, stage)
    else:
        def one(ex: str):
            return run_example(ctx, prompt_text, ex, stage)
    return await gather_cancelling([asyncio.ensure_future(one(ex)) for ex in example_ids])
