"""Speculative artifacts of the prompt pipeline (FlashEvolve §3.3): insert after the validation
prefix, confirm or remove after full validation, and fall back for work derived from a removed one.

The confirmed pool never holds an artifact without full validation: a speculative artifact is
selectable as a parent but never `best`, and it leaves the pool when its item ends any other way.
"""

from __future__ import annotations

import time

from engine.items import WorkItem
from engine.pool import Artifact
from engine.selection import merge


class SpeculationMixin:
    """Mixed into PromptStages, which provides ctx, recorder and persist_artifact()."""

    def insert_speculative(self, item: WorkItem, child: str, prefix: list[dict], partial: float, threshold: float) -> None:
        ctx = self.ctx
        art = Artifact(
            artifact_id=f"a{item.item_id[1:]}",
            text=child,
            parent_ids=merge.parent_ids(item),
            created_version=0,
            val_scores={t["example_id"]: t["score"] for t in prefix},
            status="speculative",
            created_at=time.time(),
            meta={"item_id": item.item_id, "partial": partial, "threshold": threshold,
                  **merge.merge_meta(item)},
        )
        change = ctx.pool.add(art, {"speculative": True, "partial": partial, "threshold": threshold})
        self.persist_artifact(ctx.pool.get(art.artifact_id), item.minibatch, {}, operator="mutate")
        ctx.store.insert_pool_event(ctx.run_id, change.version, change.kind, art.artifact_id, dict(change.detail), time.time())
        ctx.tally.speculative_inserted += 1
        item.payload["speculative"] = {"id": art.artifact_id, "threshold": threshold, "version": change.version}

    def settle_speculative(self, item: WorkItem) -> bool:
        """Confirm a speculative artifact on full validation or remove it; True if confirmed."""
        ctx, spec = self.ctx, item.payload["speculative"]
        full = item.payload["val"]
        mean = sum(full.values()) / len(full)
        confirmed = mean > spec["threshold"]
        status = "confirmed" if confirmed else "removed"
        change = ctx.pool.set_status(spec["id"], status, full if confirmed else None,
                                     {"val_mean": mean, "threshold": spec["threshold"]})
        stored = ctx.pool.get(spec["id"])
        self.persist_artifact(stored, item.minibatch, item.payload.get("val_feedback", {}) if confirmed else {},
                              operator="mutate", lineage=False)
        ctx.store.insert_pool_event(ctx.run_id, change.version, change.kind, spec["id"], dict(change.detail), time.time())
        if confirmed:
            ctx.tally.speculative_confirmed += 1
            return True
        self._after_removal(spec, stored)
        return False

    def abandon_speculative(self, item: WorkItem) -> None:
        """An item that inserted a speculative artifact ended without reaching update
        (review reject, crash): the unvalidated artifact must leave the pool."""
        ctx, spec = self.ctx, item.payload["speculative"]
        if ctx.pool.get(spec["id"]).status != "speculative":
            return
        change = ctx.pool.set_status(spec["id"], "removed", None, {"reason": "its item ended before validation"})
        stored = ctx.pool.get(spec["id"])
        self.persist_artifact(stored, item.minibatch, {}, operator="mutate", lineage=False)
        ctx.store.insert_pool_event(ctx.run_id, change.version, change.kind, spec["id"], dict(change.detail), time.time())
        self._after_removal(spec, stored)

    def _after_removal(self, spec: dict, stored: Artifact) -> None:
        self.ctx.tally.speculative_removed += 1
        # Work derived from the removed artifact falls back to its parent and is now stale.
        for other in self.recorder.in_flight.values():
            if other.parent_id == spec["id"]:
                other.parent_id = stored.parent_ids[0]
                other.created_version = min(other.created_version, spec["version"] - 1)
                other.payload["parent_removed"] = spec["id"]
