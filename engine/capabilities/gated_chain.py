"""Proposal chains handed on at a minibatch gate (mode chain; prompt and adapter tasks).

Why: a synchronous GEPA step makes the next proposal wait for a rollout of its parent and for
the full validation of the previous candidate, while parallel proposals from one parent (async,
pxn) tend to repeat each other's edit. A chain avoids both. The gate of a candidate runs it on
its own minibatch and on the next one, and runs the head (what the candidate was made from) on
the next one as well, so the traces for the next proposal exist the moment the gate decides:
the next item starts at propose with them, from the candidate if it passed, else from the head.
If another chain moved the shared head since the step began, the gate runs that current head
(what a passing candidate is rebased onto), so a failing chain goes on from it rather than from
a stale one. The gate is decided as soon as the answers still out could not change it (chain_gate.py).
The candidate's full validation runs in the background, off the chain's critical path.

With chains_min below chains, how many chains run adapts: a candidate that collides with
another chain's head takes a chain away, a run of steps without one adds a chain back
(ChainState.after_step); a chain over the count ends at its next hand-on.

All chains share one head. A candidate that passes after another chain moved the head is
rebased onto the newer head by a three-way line merge (selection/merge.py), so every head holds
the edits of all heads before it; one that does not apply there counts as rejected (checked
before the gate as well: such a candidate is not run, whatever its gate would say).
Validations run `chain_validators` at a time; a head that a newer head superseded before its
turn is left unvalidated (the newer head carries its edit). Only fully validated heads enter
the pool, so the confirmed pool never holds an unvalidated artifact.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Protocol

from engine import events as ev
from engine.capabilities import chain_gate
from engine.capabilities.chain_gate import Answers, Part
from engine.capabilities.chain_steering import steer_head
from engine.context import RunContext
from engine.items import ChainLink, GateScores, Rollout, WorkItem
from engine.pipeline.spec import Spawn
from engine.selection import merge


def head_text(ctx: RunContext, item: WorkItem) -> str:
    """The text an item improves: its chain head, else its pool parent (any mode)."""
    if item.chain is not None and item.chain.head_text:
        return item.chain.head_text
    return ctx.pool.get(item.parent_id).text


class ChainHost(Protocol):
    """What a task kind gives the chain: its context, the orchestrator's spawn and recorder, and
    how to run, validate and reject one candidate text of its kind."""

    ctx: RunContext
    recorder: object
    spawn: Spawn | None

    def start_side(self, text: str, ids: list[str], stage: str, capture: bool) -> list[Part]:
        """Start `text` on the examples `ids` (chain_gate.StartSide)."""

    async def validate(self, item: WorkItem, text: str, width: int | None) -> None:
        """Full validation of the candidate `text`, recorded on the item for update()."""

    def reject(self, item: WorkItem, reason: str) -> None:
        """Count, announce and end a candidate that failed."""

    def handed_on(self, item: WorkItem, answers: Answers) -> None:
        """The chain's next step `item` starts from `answers` (its traces are its rollout)."""


class GatedChain:
    """Mode chain for kinds with a minibatch gate; one per run, called by the kind at admission
    (start), at its evaluate stage (evaluate) and after a commit (committed)."""

    def __init__(self, host: ChainHost) -> None:
        self.host = host
        self.ctx = host.ctx
        self._validation_slots: asyncio.Semaphore | None = None

    def head_text(self, item: WorkItem) -> str:
        return head_text(self.ctx, item)

    def start(self, item: WorkItem) -> None:
        """A chain item admitted at rollout starts from the shared head."""
        ch = self.ctx.chain
        if not ch.head_text:  # first use in this run: the best validated artifact
            best = self.ctx.pool.best()
            ch.head_text, ch.head_base = best.text, best.artifact_id
        steer_head(self.ctx, item)
        item.parent_id = ch.head_base
        item.chain = ChainLink(ch.head_text, ch.seq, list(ch.head_chain))

    def estimate_calls(self) -> int:
        """Metric calls of one chain step: the fused gate (3 minibatches) and validation."""
        return 3 * self.ctx.config.pipeline.minibatch_size + len(self.ctx.task.val)

    async def run_side(self, text: str, ids: list[str], stage: str) -> Answers:
        parts = self.host.start_side(text, ids, stage, True)
        try:
            return Answers.joined(list(await asyncio.gather(*(f for f, _ in parts))))
        finally:
            for f, _ in parts:
                f.cancel()

    async def evaluate(self, item: WorkItem) -> WorkItem | None:
        ctx, ch = self.ctx, self.ctx.chain
        link = item.chain
        assert link is not None, "a chain item without its chain link"
        if link.gated:  # resumed after its gate (its successor exists): validation is left
            return await self._validate_head(item, item.proposal.child)
        head, child = self.head_text(item), item.proposal.child
        # The minibatch drawn at the step's start (kept on the item, so a resume reuses it).
        nxt = (item.gate.next_mb if item.gate is not None else None) or ctx.sampler.next()
        item.gate = replace(item.gate or GateScores(), next_mb=nxt)
        # The gate's head side: the shared head as it is now, if another chain moved it since this
        # step began (the candidate is merged into that one if it passes, and a failing chain goes
        # on from it with its traces).
        if ch.seq != link.head_seq and ctx.config.pipeline.chain_gate_current_head:
            gate_head, gate_seq, gate_chain, gate_base = ch.head_text, ch.seq, ch.head_chain, ch.head_base
            ctx.staleness_counts["chain_current_head"] += 1
        else:
            gate_head, gate_seq, gate_chain, gate_base = head, link.head_seq, link.head_chain, item.parent_id
        if ch.seq != link.head_seq and merge.three_way(head, child, ch.head_text) is None:
            return await self._reject_unjoinable(item, nxt, gate_head, gate_seq, gate_chain, gate_base)
        ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="minibatch",
                                           n_examples=len(item.minibatch) + len(nxt)))
        score_range = getattr(ctx.task, "score_range", (float("-inf"), float("inf")))
        gate = await chain_gate.decide(self.host.start_side, child, item.minibatch, nxt, gate_head,
                                       sum(item.rollout.parent_mb), score_range,
                                       ctx.config.pipeline.chain_early_gate)
        own, child_next, head_next = gate.child_own, gate.child_next, gate.head_next
        scores = [t["score"] for t in own + child_next.traces]
        child_sum = sum(scores)
        parent_sum = sum(item.rollout.parent_mb) + sum(t["score"] for t in head_next.traces)
        item.gate = replace(item.gate, child_mb=scores, gate_cancelled=gate.cancelled or None)
        if gate.cancelled:
            ctx.staleness_counts["chain_early_gate"] += 1
        ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="minibatch", score=child_sum / max(1, len(scores))))
        reason = ""
        if not gate.passed:
            # Early, the head's side is complete and the candidate's missing answers count at best.
            unrun = len(item.minibatch) + len(nxt) - len(scores)
            bound = f"at most {child_sum + unrun * score_range[1]:.2f}" if unrun else f"{child_sum:.2f}"
            reason = f"minibatch gate: {bound} <= head {parent_sum:.2f}"
        elif ch.seq != link.head_seq:
            rebased = merge.three_way(head, child, ch.head_text)
            if rebased is None:
                reason = "passed its gate but does not apply to the newer head (a conflict, or the edit is there)"
            else:
                child = item.amend_proposal(rebased={"from_seq": link.head_seq, "to_seq": ch.seq,
                                                     "from_parent": item.parent_id, "mechanical": True},
                                            child=rebased).child
                ctx.staleness_counts["chain_rebase"] += 1
        self._count_step(collided=reason.startswith("passed its gate"))
        if reason:
            # The chain goes on from the gate's head, with that head's traces on the next minibatch.
            self._hand_on(item, gate_head, head_next, nxt, gate_seq, gate_chain, gate_base)
            self.host.reject(item, reason)
            return None
        # Rebased or not, the candidate extends the shared head (and its lineage).
        base = item.parent_id = ch.head_base
        link.head_chain = list(ch.head_chain)
        ch.head_text, ch.seq = child, ch.seq + 1
        ch.head_chain = [item.item_id, *link.head_chain][: ch.MAX_CHAIN]
        link.gated = True  # no longer a proposing item: the chain's slot passes on
        self._hand_on(item, child, child_next, nxt, ch.seq, ch.head_chain, base)
        self.host.recorder.save_item(item, outcome=None)  # a resume must not run this gate twice
        return await self._validate_head(item, child)

    async def _reject_unjoinable(self, item: WorkItem, nxt: list[str], head: str, seq: int, head_chain: list[str],
                                 base: str) -> None:
        """A candidate that cannot join the current head (a newer head holds its edit already, or
        it conflicts there) would be rejected after its gate whatever the gate decided, so the
        candidate is not run: only the gate's head side, whose traces the chain's next step needs."""
        answers = await self.run_side(head, nxt, "rollout")
        self.ctx.staleness_counts["chain_unjoinable"] += 1
        self._count_step(collided=True)
        self._hand_on(item, head, answers, nxt, seq, head_chain, base)
        self.host.reject(item, "does not apply to the newer head (a conflict, or the edit is there); not gated")
        return None

    def _count_step(self, collided: bool) -> None:
        cfg = self.ctx.config.pipeline
        self.ctx.chain.after_step(collided, cfg.chain_floor, cfg.chains, cfg.chain_grow_after)

    def _hand_on(self, item: WorkItem, head: str, answers: Answers, minibatch: list[str], seq: int,
                 head_chain: list[str], base: str) -> None:
        """Start the chain's next step at propose, unless the head is already perfect on that
        minibatch (GEPA skips those; admission then starts a fresh item)."""
        traces = answers.traces
        if all(t["score"] >= self.ctx.task.max_score for t in traces):
            self.ctx.tally.skipped += 1
            return
        nxt = self.host.spawn(base, minibatch, "propose",
                              chain=ChainLink(head, seq, list(head_chain), chain_of=item.item_id),
                              rollout=Rollout(traces, [t["score"] for t in traces], base))
        if nxt is not None:
            self.host.handed_on(nxt, answers)

    async def _validate_head(self, item: WorkItem, child: str) -> WorkItem | None:
        ctx = self.ctx
        if self._validation_slots is None:
            self._validation_slots = asyncio.Semaphore(ctx.config.pipeline.chain_validators)
        async with self._validation_slots:
            if self._superseded(item):
                ctx.tally.superseded += 1
                newer = ctx.chain.head_chain[0] if ctx.chain.head_chain else ctx.chain.head_base
                item.end("superseded", f"a newer head ({newer}) carries its edit")
                return None
            await self.host.validate(item, child, ctx.config.pipeline.chain_validation_width)
        # Lineage: the nearest ancestor head that made it into the pool, else the base.
        item.parent_id = next((f"a{i[1:]}" for i in item.chain.head_chain if f"a{i[1:]}" in ctx.pool),
                              item.parent_id)
        return item

    def _superseded(self, item: WorkItem) -> bool:
        """A newer head exists; it holds this one's edit (every head extends the one before)."""
        ch = self.ctx.chain
        return (ch.head_chain[0] if ch.head_chain else "") != item.item_id

    def committed(self, item: WorkItem, artifact_id: str) -> None:
        """A validated head entered the pool: if it is still the shared head, chains now build
        on a pool artifact (lineage and version gaps refer to it)."""
        ch = self.ctx.chain
        if ch.head_chain and ch.head_chain[0] == item.item_id:
            ch.head_base, ch.head_chain = artifact_id, []
