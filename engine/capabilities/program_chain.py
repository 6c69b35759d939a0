"""Proposal chains for program tasks (mode chain): every step improves one shared head.

Why: in mode async each proposal starts from a parent the strategy samples, so eight proposals
in flight mostly improve eight different programs, and an improvement found in one lineage
reaches the others only through selection. A chain step instead always starts from the shared
head, the best program the chains have made, and an edit made while another chain moved the
head is carried onto the newer head before it is evaluated:

- admission: `chains` steps run at once (the orchestrator's chain admission); each starts from
  the head (at the run's start the pool's best);
- before the evaluation, if another chain moved the head since the step began, the candidate's
  edit is re-applied to the newer head by a three-way line merge (selection/merge.py): the merged
  program is what gets evaluated, so its score is the score of what would become the head; a
  candidate that cannot join (a conflict, or the newer head already holds its edit) is evaluated
  as it is, a branch of the head it was made from (`[program] chain_unjoinable = "evaluate"`: its
  LLM call is paid, an evaluation is cheap next to it on every task measured, and it becomes the
  head if it scores above it), or rejected without an evaluation ("reject": for evaluators costly
  enough that a branch is not worth a run);
- after the evaluation the strategy's acceptance decides what enters the pool, as in any mode;
  a committed program that scores above the head becomes the new head.

Unlike the prompt chain (engine/stages/chain.py) there are no traces to hand on: the next step of
a chain is admitted as the previous one ends, from the head as it is then. The count of chains
adapts as there (ChainState.after_step) when chains_min is set.
"""

from __future__ import annotations

from engine.capabilities.chain_steering import steer_head
from engine.code.patches import unified_diff
from engine.context import RunContext
from engine.items import ChainLink, WorkItem
from engine.selection import merge


class ProgramChain:
    def __init__(self, ctx: RunContext, evaluate_unjoinable: bool = True) -> None:
        self.ctx = ctx
        self.evaluate_unjoinable = evaluate_unjoinable

    def _head(self):
        """The shared head as a pool artifact; the pool's best when none is set (or it is gone)."""
        ch, pool = self.ctx.chain, self.ctx.pool
        if not ch.head_base or ch.head_base not in pool or pool.get(ch.head_base).status == "removed":
            best = pool.best()
            ch.head_base, ch.head_text, ch.head_chain = best.artifact_id, best.text, []
        return pool.get(ch.head_base)

    def start(self, item: WorkItem) -> None:
        """An admitted step starts from the head (the strategy's pick keeps its tags: islands, ...)."""
        self._head()
        steer_head(self.ctx, item)
        head = self._head()
        item.parent_id = head.artifact_id
        item.chain = ChainLink(head.text, self.ctx.chain.seq, [])

    def rebase(self, item: WorkItem) -> str:
        """Before the evaluation: carry the candidate onto a head another chain moved since the
        step began. "" when it may be evaluated, else why it was turned away unevaluated."""
        link, ch = item.chain, self.ctx.chain
        if link is None or ch.seq == link.head_seq:
            return ""
        head = self._head()
        merged = merge.three_way(link.head_text, item.proposal.child, head.text)
        if merged is None:
            self.ctx.staleness_counts["chain_unjoinable"] += 1
            self._step(collided=True)
            # No longer a step of the chain (its collision is counted), so its end counts no clean step.
            item.chain = None
            if self.evaluate_unjoinable:  # evaluated on the head it was made from
                self.ctx.staleness_counts["chain_branched"] += 1
                return ""
            return "does not apply to the newer head (a conflict, or the edit is there); not evaluated"
        item.amend_proposal(rebased={"from_seq": link.head_seq, "to_seq": ch.seq, "from_parent": item.parent_id,
                                     "mechanical": True},
                            child=merged, diff=unified_diff(head.text, merged, head.artifact_id, "child"))
        item.parent_id = head.artifact_id
        link.head_text, link.head_seq = head.text, ch.seq
        self.ctx.staleness_counts["chain_rebase"] += 1
        return ""

    def committed(self, item: WorkItem, artifact_id: str, score: float) -> None:
        """A committed program that beats the head becomes the head; a speculative head confirmed
        below the pool's best steps back to the best."""
        head = self._head()
        ch, pool = self.ctx.chain, self.ctx.pool
        if score > head.val_mean:
            self._move(artifact_id)
        elif ch.head_base == artifact_id and (best := pool.best()) is not None and best.val_mean > score:
            self._move(best.artifact_id)
        if item.chain is not None:
            self._step(collided=False)

    def speculative_head(self, item: WorkItem, artifact_id: str) -> None:
        """A speculative program (an early cascade stage above the best) becomes the head when it
        is above it, and its step hands the chain on: the next step starts from it now."""
        if self.ctx.pool.get(artifact_id).val_mean <= self._head().val_mean:
            return
        self._move(artifact_id)
        if item.chain is not None:
            item.chain.gated = True  # no longer holds a proposal slot (WorkItem.holds_proposal_slot)

    def head_removed(self, artifact_id: str) -> None:
        """A speculative head left the pool: the head steps back to the best; steps made from it
        are carried onto that (rebase) like steps made from any head that moved on."""
        if self.ctx.chain.head_base == artifact_id:
            self._move(self.ctx.pool.best().artifact_id)

    def _move(self, artifact_id: str) -> None:
        ch = self.ctx.chain
        ch.head_base, ch.head_text, ch.head_chain = artifact_id, self.ctx.pool.get(artifact_id).text, []
        ch.seq += 1

    def ended(self, item: WorkItem) -> None:
        """A step that ended without a commit (failed, rejected) still counts as a clean step."""
        if item.chain is not None and item.outcome in ("failed", "rejected"):
            self._step(collided=False)

    def _step(self, collided: bool) -> None:
        cfg = self.ctx.config.pipeline
        self.ctx.chain.after_step(collided, cfg.chain_floor, cfg.chains, cfg.chain_grow_after)
