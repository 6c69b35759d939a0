"""Reflective repair of stale proposals of text kinds (FlashEvolve §3.2, the reflective policy).

The LLM checks a proposal made against an older pool against every pool change since its
version and keeps it, patches it onto the current best, or discards it.
"""

from __future__ import annotations

from typing import Protocol

from engine import components
from engine.context import RunContext, stop_if_fatal
from engine.items import WorkItem
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.stages import reflection


class RepairHost(Protocol):
    ctx: RunContext
    recorder: object
    """Records the verdict and discards what the LLM discards."""


class ReflectiveRepair:
    """The reflect stage of a kind whose candidates are texts in `item.proposal.child` (a prompt
    or a rendering of named components)."""

    def __init__(self, host: RepairHost) -> None:
        self.host = host

    async def reflect(self, item: WorkItem) -> WorkItem | None:
        """Reflective async: the LLM checks a stale proposal against every pool change since
        its version and keeps it, patches it onto the current best, or discards it."""
        ctx, recorder = self.host.ctx, self.host.recorder
        best = ctx.pool.leader()  # speculative included: repairs build on the newest promising work
        parent = ctx.pool.get(item.parent_id)
        changes = []
        for ch in ctx.pool.changes_since(item.created_version):
            art = ctx.pool.get(ch.artifact_id)
            before = ctx.pool.get(art.parent_ids[0]).text if art.parent_ids else ""
            changes.append((ch.version, art.artifact_id, art.val_mean, before, art.text))
        messages = reflection.build_reflect_messages(
            best.text, parent.text, item.proposal.child, item.created_version, ctx.pool.version, changes
        )
        tokens_before = item.tokens
        patched = None
        try:
            res = await ctx.reflection_llm.chat(messages, stage="reflect", shrink=middle_out)
            if res.finish_reason == "length":
                verdict, reason = "malformed", "reflection cut by max_tokens"
            else:
                verdict, reason, patched = reflection.parse_verdict(res.text)
        except LLMError as exc:
            stop_if_fatal(exc)
            verdict, reason = "malformed", f"LLM error: {exc.kind}"
        if verdict == "patch" and patched is not None and patched.strip() == best.text.strip():
            verdict, reason = "discard", "patch adds nothing to the current best"
        elif (verdict == "patch" and patched is not None and best.components is not None
              and components.parse_rendering(patched, best.components) is None):
            verdict, reason = "malformed", "patch lost the component headings"
        gap = ctx.pool.gap(item.created_version)
        spent = item.tokens - tokens_before
        ctx.staleness_counts[f"reflect_{verdict}"] += 1
        recorder.record_decision(item, "reflect", gap, verdict, reason or verdict, tokens=spent,
                                      detail={"best": best.artifact_id, "changes": len(changes)})
        if verdict in ("discard", "malformed"):
            recorder.discard(item, "reflect", gap, f"reflection: {verdict}: {reason}", "discarded_reflect")
            return None
        item.reflected_at = ctx.pool.version
        if verdict == "patch":
            item.amend_proposal(rebased={"from_parent": item.parent_id, "from_version": item.created_version,
                                         "to_version": ctx.pool.version}, child=patched)
            item.parent_id = best.artifact_id
        return item
