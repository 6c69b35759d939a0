"""Admission of merge items (GEPA's merge, for text; the operator is in selection/merge.py).

GEPA owes one merge attempt per accepted proposal, up to max_merges. A merge item carries the
merged text and starts at the stage the handlers' pipeline names (merge_at); it never spends the proposal budget
and stops once that budget is used up.
"""

from __future__ import annotations

import time

from engine.costs.budget import Reservation
from engine.context import RunContext
from engine.items import MergeOf, Proposal, WorkItem
from engine.pipeline.spec import SearchHandlers
from engine.selection import merge


class MergeAdmission:
    def __init__(self, ctx: RunContext, handlers: SearchHandlers, in_flight: dict[str, WorkItem],
                 merge_at: str | None) -> None:
        """merge_at: the stage merge items enter (the pipeline's declaration; None: no merges)."""
        self.ctx = ctx
        self.handlers = handlers
        self._in_flight = in_flight
        self._merge_at = merge_at
        self._checked_at = -1
        """Pool version of the last search that found no pair: search again only after a change."""

    @property
    def running(self) -> int:
        return sum(1 for item in self._in_flight.values() if item.is_merge)

    def owed(self) -> bool:
        """A merge is due, allowed, within the proposal budget, and the pool changed since the
        last search that found no mergeable pair."""
        ctx, cfg = self.ctx, self.ctx.config.pipeline
        if not (cfg.merge and self._merge_at is not None and ctx.merges.due > 0
                and ctx.merges.done < cfg.max_merges and self._checked_at != ctx.pool.version):
            return False
        cap, budget = ctx.budget.limit("proposals"), ctx.budget
        # Merges ride along with proposals, never past their budget.
        return cap is None or budget.spent["proposals"] + budget.reserved["proposals"] < cap

    def admit(self) -> tuple[WorkItem, Reservation] | None:
        """(merge item, its budget reservation) when a merge is owed and the front holds a
        mergeable pair that the budget can pay for; else None. The caller registers the item."""
        ctx = self.ctx
        merges = ctx.merges
        if not self.owed():
            return None
        found = self.handlers.select_merge()
        self._checked_at = ctx.pool.version
        if found is None:
            return None
        reservation = ctx.budget.try_reserve(self.handlers.estimate_merge(), ctx.elapsed())
        if reservation is None:
            merges.tried.discard(merge.pair_key(found["ours"], found["theirs"]))  # try it again later
            return None
        merges.due -= 1
        merges.done += 1
        ctx.tally.merges_tried += 1
        item = WorkItem(item_id=ctx.next_item_id(), created_version=ctx.pool.version, parent_id=found["ours"],
                        minibatch=found["minibatch"], stage=self._merge_at, created_at=time.time(),
                        proposal=Proposal(child=found["text"]),
                        merge=MergeOf(found["ours"], found["theirs"], found["base"]))
        return item, reservation
