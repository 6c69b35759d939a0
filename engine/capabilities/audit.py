"""Audit records of an audited strategy (SEPL, engine/strategy/sepl.py): one row per transition
of a proposal, in the `audit` table (schema v6), written through the store's single writer.

    reflect   evidence: the parent's traces on the minibatch (score, feedback, output, cut);
              hypothesis: the reflector's reasoning (its reply outside the fenced blocks)
    select    the component to change and why (blame weights or the round-robin turn)
    improve   the proposal: the changed components' diffs; decision made / failed (why)
    evaluate  the minibatch gate (child and parent sums) and the validation mean; passed / failed
    commit    accepted (artifact id, the new component versions) or the outcome that ended it
              (rejected, failed, discarded_*, removed_speculative, ...) with its reason

A kind holds one `Audit` and calls `proposal`, `evaluation` and `commit` at its transitions;
`ended` writes the commit row of every item that ends without reaching the archive. Nothing is
written unless the strategy is `audited`.
"""

from __future__ import annotations

import difflib
import re
import time

from engine import components
from engine.components.versions import VersionIndex
from engine.context import RunContext
from engine.items import Proposal, WorkItem
from engine.strategy.protocols import Strategy

EXCERPT = 300
"""Most characters of one trace's feedback or output kept as evidence."""
_FENCED = re.compile(r"```.*?(```|$)", re.S)


def _cut(text: object, n: int = EXCERPT) -> str:
    s = str(text or "")
    return s if len(s) <= n else s[:n] + " [...]"


class Audit:
    """See the module docstring."""

    def __init__(self, ctx: RunContext, strategy: Strategy) -> None:
        self.ctx, self.strategy = ctx, strategy

    def record(self, item: WorkItem, transition: str, decision: str, reason: str = "",
               component: str | None = None, **detail) -> None:
        if not self.strategy.audited or item.is_merge:
            return
        self.ctx.store.insert_audit(self.ctx.run_id, item_id=item.item_id, transition=transition,
                                    component=component, decision=decision, reason=reason or None,
                                    detail=detail, created_at=time.time())

    def proposal(self, item: WorkItem, parent_text: str, reply: str | None) -> None:
        """Reflect, select and improve rows of a proposal that is over (made or failed)."""
        if not self.strategy.audited:
            return
        made = item.proposal or Proposal()
        chosen = made.component_choice or [None, "one-string artifact"]
        evidence = [{"example_id": t.get("example_id"), "score": t.get("score"), "feedback": _cut(t.get("feedback")),
                     "output": _cut(t.get("output"))} for t in (item.rollout.traces if item.rollout else None) or []]
        hypothesis = _cut(_FENCED.sub("", reply or "").strip(), 600)
        self.record(item, "reflect", "observed", component=chosen[0], evidence=evidence, hypothesis=hypothesis,
                   parent_id=item.parent_id)
        self.record(item, "select", "selected", chosen[1], component=chosen[0])
        child = made.child
        if child is None:
            self.record(item, "improve", "failed", item.why("proposal failed"), component=chosen[0])
            return
        diffs = components.component_diff_texts(parent_text, child)
        proposal = dict(diffs) if diffs is not None else {"text": "\n".join(difflib.unified_diff(
            parent_text.splitlines(), child.splitlines(), "parent", "child", lineterm=""))}
        self.record(item, "improve", "made", component=chosen[0], proposal=proposal,
                   changed=made.changed_components if made.changed_components is not None else [])

    def evaluation(self, item: WorkItem, passed: bool, reason: str = "") -> None:
        if not self.strategy.audited:
            return
        val = item.validation.val if item.validation is not None else {}
        evaluation = {"child_minibatch": item.gate.child_mb if item.gate is not None else None,
                      "parent_minibatch": item.rollout.parent_mb if item.rollout is not None else None,
                      "val_mean": sum(val.values()) / len(val) if val else None}
        self.record(item, "evaluate", "passed" if passed else "failed", reason, component=self._audited_component(item),
                   evaluation=evaluation)

    def commit(self, item: WorkItem, artifact_id: str) -> None:
        if not self.strategy.audited:
            return
        index = VersionIndex.of_pool(self.ctx.pool)
        carried = index.of_artifact(artifact_id)
        changed = [n for n in carried if carried[n].artifact_id == artifact_id]
        self.record(item, "commit", "accepted", f"validation mean {self.ctx.pool.get(artifact_id).val_mean:.4f}",
                   component=self._audited_component(item), artifact_id=artifact_id,
                   versions={n: carried[n].version for n in changed}, pool_version=self.ctx.pool.version)

    def ended(self, item: WorkItem) -> None:
        if not self.strategy.audited or item.charged is None:
            return
        outcome = str(item.outcome or "")
        reason = str(item.why(""))
        if outcome == "rejected" and item.gate is not None and item.gate.child_mb is not None:
            self.evaluation(item, False, reason)
        self.record(item, "commit", outcome or "ended", reason, component=self._audited_component(item))

    @staticmethod
    def _audited_component(item: WorkItem) -> str | None:
        chosen = item.proposal.component_choice if item.proposal is not None else None
        return chosen[0] if chosen else None
