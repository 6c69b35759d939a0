"""What the two kinds that score candidates example by example share (prompt tasks and GEPA
adapters): per-example instances, the validation mean as a child's score, a parent with the
next training minibatch, and GEPA's round robin over a candidate's components."""

from __future__ import annotations

from engine import components
from engine.items import WorkItem
from engine.pipeline.spec import Selection
from engine.pool import Artifact


class ExampleKindMixin:
    """Mixed into a KindHandlers whose ctx.task has val_ids and whose ctx has a sampler; the
    kind's __init__ sets `_next_component = {}` (parent id -> the next turn)."""

    _next_component: dict[str, int]

    @property
    def instances(self) -> list[str]:
        return self.ctx.task.val_ids

    def child_score(self, item: WorkItem) -> float | None:
        val = item.payload.get("val")
        return sum(val.values()) / len(val) if val else None

    def proposal_outcome(self, item: WorkItem) -> WorkItem | None:
        """A proposal made goes on (counted); one that failed ends the item, its reason tallied."""
        ctx = self.ctx
        if item.payload.get("proposal") != "made":
            reason = item.payload.get("reason", "proposal failed")
            ctx.tally.failed += 1
            ctx.tally.fail_reasons[reason.split(":")[0]] += 1
            item.end("failed", reason)
            return None
        ctx.tally.proposals += 1
        return item

    def select(self) -> Selection:
        """A parent chosen by the strategy and the next training minibatch."""
        pick = self.pick_parent()
        return Selection(pick.parent_id, self.ctx.sampler.next(), pick.tags)

    def next_component(self, parent: Artifact, parts: components.Components, item: WorkItem) -> str:
        """The parent's next evolvable component in turn (GEPA's round robin). A child starts its
        own turn after the component its parent gave last (artifact meta `next_component`), so the
        order survives a resume."""
        names = components.evolvable(parts)
        pid = parent.artifact_id
        k = self._next_component.get(pid, int(parent.meta.get("next_component", 0)))
        self._next_component[pid] = k + 1
        item.payload["next_component"] = k + 1
        return names[k % len(names)]
