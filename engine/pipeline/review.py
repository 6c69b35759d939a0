"""Human review gates: proposals wait before evaluation and/or before commit.

A gated stage parks an unreviewed item here instead of processing it, so its workers stay free
and the rest of the pipeline keeps running. A decision re-enqueues the item (approve, edit) or
ends it (reject). Parked items stay open in SQLite; a resumed run parks them again.
Decisions are rows in `reviews` and events on the bus.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable

from engine import events as ev
from engine.context import RunContext
from engine.items import WorkItem
from engine.pipeline.stage import PARKED, Stage

GATES = ("evaluate", "update")
"""Stages a review can hold items in front of: before evaluation, before commit."""


class ReviewError(Exception):
    pass


@dataclass(frozen=True)
class PendingReview:
    item_id: str
    gate: str
    parent_id: str
    parent_text: str
    child_text: str
    parked_at: float


class ReviewGates:
    def __init__(self, ctx: RunContext, stages: dict[str, Stage], end_item: Callable[[Stage, WorkItem, str], None]) -> None:
        self.ctx = ctx
        self.stages = stages
        self.end_item = end_item
        self.enabled = {g: False for g in GATES}
        cfg = ctx.config.pipeline
        self.enabled["evaluate"] = cfg.review_before_evaluate
        self.enabled["update"] = cfg.review_before_commit
        self._pending: dict[str, tuple[str, WorkItem]] = {}
        self._tasks: set[asyncio.Task] = set()

    def wrap(self, gate: str, handler):
        """The stage handler, preceded by the review check of this gate."""

        async def gated(item: WorkItem):
            if self.needs_review(gate, item):
                self.park(gate, item)
                return PARKED
            return await handler(item)

        return gated

    def needs_review(self, gate: str, item: WorkItem) -> bool:
        return self.enabled.get(gate, False) and gate not in item.reviewed

    def park(self, gate: str, item: WorkItem) -> None:
        item.parked_at = time.time()
        self._pending[item.item_id] = (gate, item)
        self.ctx.bus.publish(ev.ReviewRequested(item_id=item.item_id, gate=gate, parent_id=item.parent_id))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def pending(self) -> list[PendingReview]:
        out = []
        for gate, item in self._pending.values():
            parent = self.ctx.pool.get(item.parent_id) if item.parent_id in self.ctx.pool else None
            out.append(
                PendingReview(
                    item_id=item.item_id,
                    gate=gate,
                    parent_id=item.parent_id,
                    # A chain item is made from its head, which may not be a pool artifact yet.
                    parent_text=item.chain.head_text if item.chain is not None else (parent.text if parent else ""),
                    child_text=str(item.proposal.child if item.proposal is not None else ""),
                    parked_at=float(item.parked_at if item.parked_at is not None else 0.0),
                )
            )
        return out

    def set_enabled(self, gate: str, on: bool) -> None:
        if gate not in GATES:
            raise ReviewError(f"unknown review gate {gate!r}; gates are {', '.join(GATES)}")
        self.enabled[gate] = on
        if not on:
            # Turning a gate off lets what it holds through, as if approved.
            for item_id, (g, _) in list(self._pending.items()):
                if g == gate:
                    self.decide(item_id, "approve", reason="review gate turned off")

    def decide(self, item_id: str, decision: str, reason: str = "", edited_text: str | None = None) -> None:
        """approve | reject | edit (with edited_text) | skip (back of the queue)."""
        if item_id not in self._pending:
            raise ReviewError(f"item {item_id} is not waiting for review")
        gate, item = self._pending[item_id]
        if decision == "skip":
            self._pending[item_id] = self._pending.pop(item_id)
            return
        if decision not in ("approve", "reject", "edit"):
            raise ReviewError(f"unknown review decision {decision!r}; use approve, reject, edit or skip")
        if decision == "edit":
            if gate != "evaluate":
                raise ReviewError("edits are possible before evaluation only; an edit here would commit "
                                  "text with another text's scores (approve or reject it)")
            if edited_text is None or not edited_text.strip():
                raise ReviewError("an edit needs the edited text; empty text is not a proposal")
            item.amend_proposal(child=edited_text.strip(), edited=True)
        del self._pending[item_id]
        self.ctx.store.insert_review(
            self.ctx.run_id, item_id=item_id, gate=gate, decision=decision, reason=reason or None,
            edited=decision == "edit", created_at=time.time(),
        )
        self.ctx.bus.publish(ev.ReviewDecided(item_id=item_id, gate=gate, decision=decision, reason=reason))
        stage = self.stages[gate]
        if decision == "reject":
            item.outcome = "rejected_by_review"
            item.reason = reason or "rejected by reviewer"
            self.ctx.tally.rejected += 1
            self.end_item(stage, item, "rejected_by_review")
            return
        item.reviewed[gate] = decision
        task = asyncio.create_task(stage.put(item), name=f"review-{item_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def approve_all(self, gate: str | None = None) -> int:
        ids = [i for i, (g, _) in self._pending.items() if gate is None or g == gate]
        for item_id in ids:
            self.decide(item_id, "approve", reason="approve all")
        return len(ids)
