"""The executor's local fix loop on program tasks (LoongFlow §4.1.2; the variants and their
bounds are engine/strategy/executor.py): a candidate whose patch applied is checked locally
(engine/code/local_checks.py, nothing executed) and, while it fails, the proposer is shown the
errors in the same conversation and asked again, at most the variant's rounds. Each repair is an
LLM call of stage `execute_fix`, charged to the item like its proposal.

What happened is kept as a plain record, `executor_fix` in the item's proposal (Proposal.executor_fix) and the committed
child's meta: the variant that worked, the outcome (unchecked / passed / repaired / failed) and
one entry per repair call with the round, the reason it was made (the errors shown) and its result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.code.languages import LanguageSpec
from engine.code.local_checks import local_errors
from engine.code.patches import apply_reply
from engine.context import RunContext, stop_if_fatal
from engine.llm.errors import LLMError
from engine.stages import program_prompt as prompt
from engine.strategy.executor import REPAIR_STAGE, ExecutorSpec, fix_request

REPLY_CAP = 6000


@dataclass
class FixOutcome:
    child: str | None
    """The candidate to validate; None when it still fails after the last repair call."""
    reason: str = ""
    """Why the candidate was given up (child None)."""
    record: dict = field(default_factory=dict)


async def fix_locally(ctx: RunContext, spec: ExecutorSpec, parent_text: str, parent_score: float,
                      messages: list[dict], reply: str, child: str, fmt: str, language: LanguageSpec,
                      task_dir: Path | None) -> FixOutcome:
    """The candidate, repaired if it had to be and could be (see the module's docstring)."""
    rounds = spec.rounds_for(parent_score)
    record: dict = {"executor": spec.mode_for(parent_score), "calls": []}
    if rounds == 0:
        return FixOutcome(child, record={**record, "outcome": "unchecked"})
    errors = local_errors(child, language, task_dir)
    if not errors:
        return FixOutcome(child, record={**record, "outcome": "passed"})
    first = list(errors)
    patch_failed = False
    for n in range(1, rounds + 1):
        ask = (prompt.retry_messages(messages, reply, errors, fmt) if patch_failed else
               [*messages, {"role": "assistant", "content": prompt.clip(reply, REPLY_CAP)},
                {"role": "user", "content": fix_request(errors, fmt)}])
        call = {"round": n, "reason": "; ".join(errors)[:1000]}
        record["calls"].append(call)
        try:
            res = await ctx.reflection_llm.chat(ask, stage=REPAIR_STAGE)
        except LLMError as exc:
            stop_if_fatal(exc)
            call["result"] = f"LLM error: {exc.kind}"
            break
        if res.finish_reason == "length":
            call["result"] = "truncated (finish_reason=length)"
            break
        messages, reply = ask, res.text
        patch = apply_reply(parent_text, reply, fmt, language)
        ctx.program.tolerant_blocks += patch.tolerant
        if not patch.ok:
            patch_failed, errors = True, list(patch.errors)
            call["result"] = f"patch failed: {errors[0]}"[:300]
            continue
        patch_failed, child = False, patch.text
        errors = local_errors(child, language, task_dir)
        if not errors:
            call["result"] = "fixed"
            return FixOutcome(child, record={**record, "outcome": "repaired", "first_errors": first})
        call["result"] = f"still failing: {errors[0]}"[:300]
    made = len(record["calls"])
    last = errors[0] if errors else first[0]
    return FixOutcome(None, f"local check: {last} (after {made} repair call{'s' if made != 1 else ''})",
                      {**record, "outcome": "failed", "first_errors": first})
