"""Steering on a running run: acts go through here, and so do the two hooks the pipeline calls.

- `take(ctx, req, by)`: check an operator's request against the run (SteeringState.check), then
  record it: a row through the store's single writer (so it is ordered with the run's other
  writes and a kill leaves a prefix), the state, a Steered bus event.
- `load(ctx)`: a resumed run's acts, replayed into its state before any parent is picked.
- `with_operator_guidance(ctx, messages, item)`: the proposer's request with the active guidance
  under "## Guidance from the operator" (KindHandlers.with_guidance calls it for every task kind).
  The first time a proposal is shown a guidance is a `use` act (it counts against the guidance's
  N); a resumed proposal is shown what it was shown before and counts nothing again.
- `steered_pick(ctx, pick)`: the strategy's pick, then the pin (the pinned candidate replaces
  the pick, the selector's tags kept) and the bans (a banned pick is drawn again, at most
  REPICKS times, then the best candidate not banned).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine import events as ev
from engine.pool import is_confirmed, is_live
from engine.steering import reeval
from engine.steering.acts import OPERATOR_ACTS, Act, SteerError
from engine.steering.state import SteeringState
from engine.strategy.protocols import Pick

if TYPE_CHECKING:
    from engine.context import RunContext
    from engine.items import WorkItem

HEADING = "## Guidance from the operator"
NOTE_KEY = "operator_guidance"
"""The item's note (and so the committed child's meta["notes"]) that names the guidance it was
shown: the lineage screen's notes panel and the EvoTrace export carry it."""
INTRO = ("The person running this search asks the next proposals to follow this guidance (it outranks the "
         "other hints; the output format stays as asked above):")
REPICKS = 8
BYS = ("cli", "tui", "control", "python")


def take(ctx: RunContext, req: dict[str, Any], by: str) -> Act:
    """Carry out one operator request ({"act": ..., ...}); SteerError if refused (nothing written)."""
    if by not in BYS:
        raise SteerError(f"unknown requester {by!r}")
    if req.get("act") not in OPERATOR_ACTS:
        raise SteerError(f"unknown steering act {req.get('act')!r}; one of {', '.join(OPERATOR_ACTS)}")
    fields = ctx.steering.check(req, ctx.pool)
    if req["act"] == "reeval":
        reeval.check_possible(ctx, fields, str(fields["target"]))
    act = Act(act_id=ctx.steering.next_id, act=str(req["act"]), by=by, **fields)
    record(ctx, act)
    return act


async def take_and_finish(ctx: RunContext, req: dict[str, Any], by: str) -> list[Act]:
    """take(), and for a re-evaluation also run it: [the request, its `reevaluated` result]. A
    re-evaluation that fails is recorded too (detail "error") and then raised as SteerError."""
    act = take(ctx, req, by)
    if act.act != "reeval":
        return [act]
    try:
        detail = await reeval.reevaluate(ctx, act)
    except SteerError as exc:
        record(ctx, Act(act_id=ctx.steering.next_id, act="reevaluated", by="engine", target=act.target,
                        detail={"request": act.act_id, "error": str(exc), "summary": f"failed: {exc}"}))
        raise
    done = Act(act_id=ctx.steering.next_id, act="reevaluated", by="engine", target=act.target, detail=detail)
    record(ctx, done)
    return [act, done]


def record(ctx: RunContext, act: Act) -> None:
    ctx.store.insert_steering(ctx.run_id, act.row(ctx.run_id))
    ctx.steering.apply(act)
    if act.act != "use":
        ctx.bus.publish(ev.Steered(act_id=act.act_id, act=act.act, by=act.by, target=act.target, text=act.text,
                                   count=act.count, summary=act.describe()))


async def load(ctx: RunContext) -> None:
    """Replay the run's stored acts (a resume)."""
    rows = await ctx.store.fetch_rows("steering", ctx.run_id)
    ctx.steering = SteeringState(Act.from_row(r) for r in rows)


def status(ctx: RunContext) -> dict[str, Any]:
    return ctx.steering.view()


# -- the proposer's request -------------------------------------------------------------------
def with_operator_guidance(ctx: RunContext, messages: list[dict], item: WorkItem) -> list[dict]:
    state = ctx.steering
    for gid in state.new_for(item.item_id):
        record(ctx, Act(act_id=state.next_id, act="use", by="engine", target=str(gid), item_id=item.item_id))
    shown = state.used.get(item.item_id, [])
    if not shown:
        return messages
    notes = dict(item.notes or {})
    notes[NOTE_KEY] = "\n".join(f"#{gid}: {state.texts[gid]}" for gid in shown)
    item.notes = notes
    return append_section(messages, {gid: state.texts[gid] for gid in shown})


def append_section(messages: list[dict], guidance: dict[int, str]) -> list[dict]:
    """The last user message with the guidance appended, each line quoted so a fenced block in
    it never passes for the text to improve (the builders' contracts find that by its fence)."""
    parts = ["", HEADING, INTRO]
    for gid, text in guidance.items():
        parts.append(f"### #{gid}\n" + "\n".join(f"> {line}" for line in text.splitlines()))
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    out = [dict(m) for m in messages]
    out[last]["content"] = f"{out[last]['content']}\n" + "\n".join(parts)
    return out


# -- parent selection ---------------------------------------------------------------------------
def steered_pick(ctx: RunContext, pick: Callable[[], Pick]) -> Pick:
    state = ctx.steering
    if state.pin is None and not state.bans:
        return pick()
    chosen = pick()
    pin = state.pin
    if pin is not None and pin.artifact_id in ctx.pool and is_confirmed(ctx.pool.get(pin.artifact_id)):
        record(ctx, Act(act_id=state.next_id, act="use", by="engine", target=str(pin.act_id), created_at=time.time()))
        return Pick(pin.artifact_id, {**chosen.tags, "steer_pin": pin.act_id})
    for _ in range(REPICKS):
        if chosen.parent_id not in state.bans:
            return chosen
        chosen = pick()
    allowed = [a for a in ctx.pool.artifacts() if is_live(a) and is_confirmed(a) and a.artifact_id not in state.bans]
    if not allowed:  # each ban kept a validated candidate free; this is only reached if that changed
        ctx.bus.publish(ev.Notice(level="warning", message="every validated candidate is banned: the strategy's "
                                  "pick stands; unban one with `evotui steer RUN unban ID`"))
        return chosen
    best = max(allowed, key=lambda a: a.val_mean)
    return Pick(best.artifact_id, {**chosen.tags, "steer_ban": "best not banned"})
