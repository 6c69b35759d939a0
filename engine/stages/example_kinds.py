"""What the two kinds that score candidates example by example share (prompt tasks and GEPA
adapters): per-example instances, the validation mean as a child's score, a parent with the
next training minibatch, GEPA's round robin over a candidate's components, and the rules of a
component update (its type and frozen regions: stated in the proposer's prompt, enforced on the
reply)."""

from __future__ import annotations

from typing import Sequence

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
        val = item.validation.val if item.validation is not None else None
        return sum(val.values()) / len(val) if val else None

    def proposal_outcome(self, item: WorkItem) -> WorkItem | None:
        """A proposal made goes on (counted); one that failed ends the item, its reason tallied."""
        ctx = self.ctx
        if item.charged != "made":
            reason = item.why("proposal failed")
            ctx.tally.failed += 1
            ctx.tally.fail_reasons[reason.split(":")[0]] += 1
            item.end("failed", reason)
            return None
        ctx.tally.proposals += 1
        return item

    def with_component_rules(self, messages: list[dict], parts: components.Components,
                             targets: list[str]) -> list[dict]:
        """The proposal request with the targets' `## Component rules` (type, frozen regions)
        appended to its last user message; unchanged when every target is plain text."""
        section = components.rules_section(parts, targets)
        if section is None:
            return messages
        last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
        out = [dict(m) for m in messages]
        out[last]["content"] = f"{out[last]['content']}\n\n{section}"
        return out

    def enforce_component_rules(self, parts: components.Components, child: str, changed: list[str],
                                item: WorkItem) -> tuple[str | None, list[str], str]:
        """(child rendering, changed names, "") with every refused component update (a frozen
        region dropped or altered, the type's syntax broken) put back to the parent's text, or
        (None, [], why) when no change is left. Each refusal is counted in the tally's
        fail_reasons as "component refused: <why>" and listed in the item's proposal (refused_components)
        (the child's meta keeps it)."""
        kept, left, refused = components.enforce_rendering(parts, child)
        if not refused:
            return child, changed, ""
        for key, _ in refused.values():
            self.ctx.tally.fail_reasons[f"component refused: {key}"] += 1
        item.amend_proposal(refused_components={name: message for name, (_, message) in refused.items()})
        if kept is None:
            return None, [], "component update refused: " + "; ".join(m for _, m in refused.values())
        return kept, left, ""

    def figures(self) -> dict:
        """Refused component updates by reason (frozen region, invalid tool_code, ...), when the
        task has named components."""
        if getattr(self.ctx.task, "seed_components", None) is None:
            return super().figures()
        prefix = "component refused: "
        return {**super().figures(),
                "component_refusals": {k[len(prefix):]: n for k, n in sorted(self.ctx.tally.fail_reasons.items())
                                       if k.startswith(prefix)}}

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
        item.amend_proposal(next_component=k + 1)
        return names[k % len(names)]

    def choose_component(self, names: Sequence[str], turn: str, item: WorkItem) -> str:
        """The strategy's Select (round robin unless it has a component_choice)."""
        choice = self.strategy.component_choice
        if choice is None:
            return turn
        name, why = choice(list(names), list((item.rollout.traces if item.rollout is not None else None) or []), turn)
        item.amend_proposal(component_choice=[name, why])
        return name
