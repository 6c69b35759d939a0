"""A strategy's own LLM stages (engine/strategy/protocols.py: StrategyStage), run by a task kind.

The kind turns each into a pipeline stage: it shows the strategy a read-only view of the item,
gives it the proposer LLM (charged to the item, failures turned into a fallback), and keeps
what the stage returns in the item's notes. Notes reach the proposer as a guidance section at
the end of its request (after the stable prefix, so prefix caches still hit) and the committed
child's meta["notes"].

Two more duties of the seam live here:

- **Stale notes.** A stage's guiding notes carry the pool version they were made from (its
  `version_key`). Right before the proposer sees them (`fresh_notes`, called by the propose
  stage) their gap to the current pool goes through the run's staleness policy: `full` uses them
  as they are, `guarded` drops them and runs the stage again against the current pool,
  `reflective` asks the stage's `revise` (an LLM repair with what changed since). Each decision
  on a stale note is a staleness row (stage `<stage>_note`) and counted as `note_<action>`.
- **Ended items.** A strategy with `item_ended` is told of every item that ends without reaching
  the archive (`ended`, called by the kind); on a resumed run it is first told of every stored
  one (`KindEnv.replay_ended`, before any strategy stage works), so what it built from them is
  rebuilt from the rows, not lost with the process.
"""

from __future__ import annotations

import asyncio
import random
from typing import Awaitable, Callable, Mapping

from engine.context import RunContext, stop_if_fatal
from engine.items import Proposal, WorkItem
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.pipeline.spec import StageSpec
from engine.strategy.protocols import Archive, EndedItem, StageView, Strategy, StrategyStage

NOTE_CHARS = 4000
"""Most characters of one note shown to the proposer."""


class KindEnv:
    """StrategyEnv over a run's context (one per run's handlers)."""

    def __init__(self, ctx: RunContext, strategy: Strategy) -> None:
        self.ctx = ctx
        self.strategy = strategy
        self.archive: Archive = ctx.pool
        self.rng: random.Random = ctx.rng
        self.description: str = ctx.task.description
        self._replayed = strategy.item_ended is None
        self._replay_lock = asyncio.Lock()

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        try:
            res = await self.ctx.reflection_llm.chat(messages, stage=stage, shrink=middle_out)
        except LLMError as exc:
            stop_if_fatal(exc)
            return None
        return None if res.finish_reason == "length" else res.text

    async def replay_ended(self) -> None:
        """Tell the strategy every stored item that ended without reaching the archive (once per
        process; items ending live are told as they end, and telling one twice is harmless)."""
        if self._replayed:
            return
        async with self._replay_lock:
            if self._replayed:
                return
            told = self.strategy.item_ended
            assert told is not None
            for row in await self.ctx.store.fetch_rows("items", self.ctx.run_id):
                if row.get("outcome") not in (None, "accepted"):
                    told(ended_from_row(row))
            self._replayed = True


# -- ended items ------------------------------------------------------------------------------
def _ended(item: WorkItem, outcome: str, reason: str) -> EndedItem:
    """One constructor for a live item and its stored row, so both tell the strategy the same."""
    notes = item.notes
    proposal = item.proposal or Proposal()
    child, diff = proposal.child, proposal.diff
    return EndedItem(item_id=item.item_id, parent_id=item.parent_id, created_version=item.created_version,
                     outcome=outcome, reason=reason, merge=item.is_merge,
                     child=child if isinstance(child, str) else None, diff=diff if isinstance(diff, str) else None,
                     notes={str(k): str(v) for k, v in notes.items()} if isinstance(notes, Mapping) else {})


def ended_from_item(item: WorkItem) -> EndedItem:
    return _ended(item, str(item.outcome or ""), str(item.why("")))


def ended_from_row(row: Mapping[str, object]) -> EndedItem:
    """The stored row (engine/pipeline/recorder.py saves it before the hook runs)."""
    return _ended(WorkItem.from_row(dict(row)), str(row.get("outcome") or ""), str(row.get("error") or ""))


def ended(strategy: Strategy, item: WorkItem) -> None:
    """The kind's hook for an item that ended without reaching the archive."""
    if strategy.item_ended is not None:
        strategy.item_ended(ended_from_item(item))


# -- the stages -------------------------------------------------------------------------------
def stage_specs(stages: tuple[StrategyStage, ...], when: str, env: KindEnv,
                child_score: Callable[[WorkItem], float | None]) -> list[StageSpec]:
    """Pipeline stages for the strategy stages that run `when`."""
    return [StageSpec(st.name, _runner(st, env, child_score), workers=st.workers)
            for st in stages if st.when == when]


def _view(item: WorkItem, env: KindEnv, child_score: Callable[[WorkItem], float | None], **kw) -> StageView:
    base = dict(item_id=item.item_id, parent=env.ctx.pool.get(item.parent_id), pool_version=item.created_version,
                notes=dict(item.notes or {}), child=item.proposal.child if item.proposal is not None else None,
                child_score=child_score(item))
    return StageView(**{**base, **kw})


def _merge_notes(item: WorkItem, added: Mapping[str, str], dropped: tuple[str, ...] = ()) -> None:
    notes = {k: v for k, v in dict(item.notes or {}).items() if k not in dropped}
    item.notes = {**notes, **{str(k): str(v) for k, v in added.items()}}


def _runner(st: StrategyStage, env: KindEnv,
            child_score: Callable[[WorkItem], float | None]) -> Callable[[WorkItem], Awaitable[WorkItem | None]]:
    async def run(item: WorkItem) -> WorkItem | None:
        await env.replay_ended()
        added = await st.run(_view(item, env, child_score), env)
        if added:
            _merge_notes(item, added)
        return item

    return run


# -- stale notes ------------------------------------------------------------------------------
def note_version(notes: Mapping[str, str], st: StrategyStage) -> int | None:
    """The pool version a stage's guiding notes were made from; None if it has none to check."""
    if not st.version_key or not any(k in notes for k in st.guides):
        return None
    raw = str(notes.get(st.version_key, ""))
    return int(raw) if raw.lstrip("-").isdigit() else None


async def fresh_notes(stages: tuple[StrategyStage, ...], item: WorkItem, env: KindEnv, recorder,
                      child_score: Callable[[WorkItem], float | None]) -> None:
    """Put each before-propose stage's stale guiding notes through the staleness policy (see
    the module's docstring). A note without a version (or a fresh one) is left alone."""
    ctx = env.ctx
    for st in stages:
        if st.when != "before_propose":
            continue
        made = note_version(dict(item.notes or {}), st)
        if made is None or ctx.pool.version <= made:
            continue
        gap = ctx.pool.version - made
        decision = ctx.policy.decide(gap, reflectable=True)
        mine = (*st.guides, st.version_key)
        tokens_before = item.tokens
        if decision.action == "pass":
            action, reason = "kept", decision.reason
        elif decision.action == "reflect" and st.revise is not None:
            revised = await st.revise(_view(item, env, child_score, pool_version=made), env)
            action = "revised" if revised else "dropped"
            reason = f"{decision.reason}: note revised" if revised else f"{decision.reason}: repair failed, note dropped"
            _merge_notes(item, revised, dropped=mine)
        else:
            redone = await st.run(_view(item, env, child_score, pool_version=ctx.pool.version, refresh=True), env)
            action, reason = "redone", f"{decision.reason}: note dropped, stage {st.name} ran again"
            _merge_notes(item, redone, dropped=mine)
        ctx.staleness_counts[f"note_{action}"] += 1
        if recorder is not None:
            recorder.record_decision(item, f"{st.name}_note", gap, action, reason, tokens=item.tokens - tokens_before,
                                     detail={"note_version": made})


def guidance_keys(stages: tuple[StrategyStage, ...]) -> frozenset[str]:
    return frozenset(key for st in stages for key in st.guides)


def with_guidance(messages: list[dict], item: WorkItem, shown: frozenset[str]) -> list[dict]:
    """The proposal request with the item's guiding notes (`shown`) appended to its last user
    message, quoted so that fenced blocks in a note never pass for the text to improve."""
    notes = {k: v for k, v in (item.notes or {}).items() if k in shown}
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
