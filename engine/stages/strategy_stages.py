"""A strategy's own LLM stages (engine/strategy/protocols.py: StrategyStage), run by a task kind.

The kind turns each into a pipeline stage: it shows the strategy a read-only view of the item,
gives it the proposer LLM (charged to the item, failures turned into a fallback), and keeps
what the stage returns in the item's notes. Notes reach the proposer as a guidance section at
the end of its request (after the stable prefix, so prefix caches still hit) and the committed
child's meta["notes"].
"""

from __future__ import annotations

import random
from typing import Awaitable, Callable

from engine.context import FatalRunError, RunContext
from engine.items import WorkItem
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.pipeline.spec import StageSpec
from engine.strategy.protocols import Archive, StageView, StrategyStage

NOTE_CHARS = 4000
"""Most characters of one note shown to the proposer."""


class KindEnv:
    """StrategyEnv over a run's context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.archive: Archive = ctx.pool
        self.rng: random.Random = ctx.rng
        self.description: str = ctx.task.description

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        try:
            res = await self.ctx.reflection_llm.chat(messages, stage=stage, shrink=middle_out)
        except LLMError as exc:
            if exc.fatal:
                raise FatalRunError(str(exc)) from None
            return None
        return None if res.finish_reason == "length" else res.text


def stage_specs(stages: tuple[StrategyStage, ...], when: str, ctx: RunContext,
                child_score: Callable[[WorkItem], float | None]) -> list[StageSpec]:
    """Pipeline stages for the strategy stages that run `when`."""
    env = KindEnv(ctx)
    return [StageSpec(st.name, _runner(st, env, ctx, child_score), workers=st.workers)
            for st in stages if st.when == when]


def _runner(st: StrategyStage, env: KindEnv, ctx: RunContext,
            child_score: Callable[[WorkItem], float | None]) -> Callable[[WorkItem], Awaitable[WorkItem | None]]:
    async def run(item: WorkItem) -> WorkItem | None:
        notes = dict(item.payload.get("notes") or {})
        view = StageView(item_id=item.item_id, parent=ctx.pool.get(item.parent_id),
                         pool_version=item.created_version, notes=notes,
                         child=item.payload.get("child"), child_score=child_score(item))
        added = await st.run(view, env)
        if added:
            item.payload["notes"] = {**notes, **{str(k): str(v) for k, v in added.items()}}
        return item

    return run


def guidance_keys(stages: tuple[StrategyStage, ...]) -> frozenset[str]:
    return frozenset(key for st in stages for key in st.guides)


def with_guidance(messages: list[dict], item: WorkItem, shown: frozenset[str]) -> list[dict]:
    """The proposal request with the item's guiding notes (`shown`) appended to its last user
    message, quoted so that fenced blocks in a note never pass for the text to improve."""
    notes = {k: v for k, v in (item.payload.get("notes") or {}).items() if k in shown}
    if not notes:
        return messages
    parts = ["", "## Guidance from the search strategy"]
    for name, text in notes.items():
        quoted = "\n".join(f"> {line}" for line in str(text)[:NOTE_CHARS].splitlines())
        parts.append(f"### {name}\n{quoted}")
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    out = [dict(m) for m in messages]
    out[last]["content"] = f"{out[last]['content']}\n" + "\n".join(parts)
    return out


def strategy_calls(stages: tuple[StrategyStage, ...]) -> int:
    return sum(st.calls for st in stages)
