"""The operator's pin and ban (engine/steering/) in mode chain, where no step takes a parent
pick: they move the chains' shared head instead.

- pin: a step admitted while a pin is in force (its pick carries the `steer_pin` tag) moves the
  shared head to the pinned candidate; chains then build on it, and steps made from the old head
  are rebased onto it (or turned away unjoinable) as after any head move;
- ban: a step admitted while the head's base is banned moves the head to the best validated
  candidate that is not banned (the pick steered_pick made).
"""

from __future__ import annotations

from engine.context import RunContext
from engine.items import WorkItem


def steer_head(ctx: RunContext, item: WorkItem) -> bool:
    """Move ctx.chain's head as the operator's pin or ban asks (item: a step just admitted, its
    parent the steered pick); True if it moved."""
    ch, pool = ctx.chain, ctx.pool
    pinned = "steer_pin" in item.tags
    banned = bool(ch.head_base) and ch.head_base in ctx.steering.bans
    if not (pinned or banned) or item.parent_id == ch.head_base or item.parent_id not in pool:
        return False
    target = pool.get(item.parent_id)
    if banned and not pinned:  # the best validated candidate not banned (the steered pick may be any)
        allowed = [a for a in pool.confirmed() if a.artifact_id not in ctx.steering.bans]
        target = max(allowed, key=lambda a: a.val_mean) if allowed else target
    ch.head_text, ch.head_base, ch.head_chain, ch.seq = target.text, target.artifact_id, [], ch.seq + 1
    ctx.staleness_counts["chain_steered"] += 1
    return True
