"""Speculative artifacts (FlashEvolve §3.3): insert after the validation prefix, confirm or
remove after full validation, and fall back for work derived from a removed one.

The confirmed pool never holds an artifact without full validation: a speculative artifact is
selectable as a parent but never `best`, and it leaves the pool when its item ends any other way.
"""

from __future__ import annotations

import time

from typing import Protocol

from engine.components import Components
from engine.context import RunContext
from engine.items import SpeculativeEntry, WorkItem
from engine.ledger import Ledger
from engine.pool import Artifact
from engine.selection import merge


class SpeculationHost(Protocol):
    ctx: RunContext
    ledger: Ledger
    """The pool's one writer."""
    recorder: object
    """Its `in_flight` items fall back when an artifact they derive from is removed."""

    def artifact_meta(self, item: WorkItem) -> dict: ...


class Speculation:
    """Called by a kind with speculation on: `insert` after a validation prefix that beats the
    pool's best, `settle` in update, `abandon` when the item ends any other way."""

    def __init__(self, host: SpeculationHost) -> None:
        self.host = host

    def insert(self, item: WorkItem, child: str, prefix: list[dict], partial: float, threshold: float,
               components: Components | None = None) -> None:
        """`components`: the child's named components, for kinds that have them (they stay with
        the artifact when it is confirmed)."""
        art = Artifact(
            artifact_id=f"a{item.item_id[1:]}",
            text=child,
            parent_ids=merge.parent_ids(item),
            created_version=0,
            val_scores={t["example_id"]: t["score"] for t in prefix},
            status="speculative",
            created_at=time.time(),
            meta={**self.host.artifact_meta(item), "partial": partial, "threshold": threshold},
            components=components,
        )
        change = self.host.ledger.insert_speculative(item, art, partial, threshold)
        item.speculative = SpeculativeEntry(art.artifact_id, threshold, change.version)

    def settle(self, item: WorkItem) -> bool:
        """Confirm a speculative artifact on full validation (the ledger accepts it) or remove
        it; True if confirmed."""
        spec = item.speculative
        assert spec is not None
        full = item.validation.val
        mean = sum(full.values()) / len(full)
        if mean > spec.threshold:
            self.host.ledger.confirm(item, spec.artifact_id, full, mean, spec.threshold, item.validation.val_feedback)
            return True
        stored = self.host.ledger.remove(item, spec.artifact_id, {"val_mean": mean, "threshold": spec.threshold})
        self._after_removal(spec, stored)
        return False

    def abandon(self, item: WorkItem) -> None:
        """An item that inserted a speculative artifact ended without reaching update
        (review reject, crash): the unvalidated artifact must leave the pool."""
        ctx, spec = self.host.ctx, item.speculative
        if spec is None or ctx.pool.get(spec.artifact_id).status != "speculative":
            return
        stored = self.host.ledger.remove(item, spec.artifact_id, {"reason": "its item ended before validation"})
        self._after_removal(spec, stored)

    def _after_removal(self, spec: SpeculativeEntry, stored: Artifact) -> None:
        # Work derived from the removed artifact falls back to its parent and is now stale.
        for other in self.host.recorder.in_flight.values():
            if other.parent_id == spec.artifact_id:
                other.parent_id = stored.parent_ids[0]
                other.created_version = min(other.created_version, spec.version - 1)
                other.parent_removed = spec.artifact_id


def adopt_speculative(pool, backlog: list[WorkItem]) -> int:
    """On resume: an open item whose speculative artifact is in the pool owns it again. A kill can
    fall between the insert (its pool rows) and the item's own row naming the artifact; without
    this the resumed item would insert it a second time. Returns how many were adopted."""
    open_items = {f"a{item.item_id[1:]}": item for item in backlog}
    adopted = 0
    for art in pool.artifacts():
        item = open_items.get(art.artifact_id)
        if art.status == "speculative" and item is not None and item.speculative is None:
            item.speculative = SpeculativeEntry(art.artifact_id, float(art.meta["threshold"]), art.created_version)
            adopted += 1
    return adopted
