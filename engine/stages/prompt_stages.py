"""Stage handlers of the prompt-task pipeline: rollout -> propose -> evaluate -> update.

The strategy (engine/strategy/) picks parents, chooses the other prompts the proposer sees,
gates candidates (or not) and offers merges; this kind runs prompts on examples, reflects on
the traces and validates. The same handlers serve every execution mode; inside a handler the requests of one item run
concurrently and the handler returns when all of them are done (GEPA's per-stage barrier).
A handler returns the item to forward it, or None after recording the item's outcome in
item.outcome.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Mapping

from engine import components
from engine import events as ev
from engine.context import CallFailed, FatalRunError, RunContext, stop_if_fatal
from engine.items import GateScores, Rollout, Validation, WorkItem, current_item
from engine.ledger import EvalRow
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.pipeline.spec import PipelineSpec, StageSpec
from engine.pool import Artifact
from engine.selection import merge
from engine.stages import reflection, textgrad
from engine.components.hot_swap import PinnedParents
from engine.capabilities import gated_chain
from engine.capabilities.audit import Audit
from engine.capabilities.chain_gate import Answers, Part
from engine.capabilities.gated_chain import GatedChain
from engine.capabilities.reflective_repair import ReflectiveRepair
from engine.capabilities.speculation import Speculation
from engine.capabilities.speculative_rollout import SpeculativeRollout
from engine.stages.base import KindHandlers
from engine.stages.example_kinds import ExampleKindMixin
from engine.stages.prompt_examples import run_example, run_examples
from engine.strategy.protocols import Evidence, Strategy

TOKENS_PER_CALL_PRIOR = 1500.0
"""Tokens per call assumed for budget reservations until calls have been observed."""

class PromptStages(PinnedParents, ExampleKindMixin, KindHandlers):
    """Handlers of a prompt task running `strategy` (engine/pipeline/spec.py: SearchHandlers),
    with the capabilities the mode and strategy ask for (engine/capabilities/): proposal chains,
    speculative validation, reflective repair of stale proposals and audit records."""

    kind = "prompt"

    def __init__(self, ctx: RunContext, strategy: Strategy) -> None:
        super().__init__(ctx, strategy, evaluation_rows)
        if self.mode.chains and not strategy.acceptance.gated:
            raise ValueError(f"mode {self.mode.name} hands each step on at the minibatch gate; strategy "
                             f"{strategy.name} has no gate (use strategy gepa, or mode async)")
        self._next_component: dict[str, int] = {}
        """Round robin per parent (GEPA): the parent's next component to rewrite."""
        self.chain = GatedChain(self) if self.mode.chains else None
        self.speculation = Speculation(self)
        self.repair = ReflectiveRepair(self)
        self.audit = Audit(ctx, strategy)
        fraction = ctx.config.pipeline.speculative_rollout  # hook: engine/capabilities/speculative_rollout.py
        self.spec_rollout = SpeculativeRollout(self, fraction) if fraction and self.chain is None else None

    def pipeline(self) -> PipelineSpec:
        return PipelineSpec(
            stages=(StageSpec("rollout", self.rollout), *self.strategy_stages("before_propose"),
                    StageSpec("propose", self.propose, checks_staleness=True),
                    StageSpec("evaluate", self.evaluate, checks_staleness=True), *self.strategy_stages("after_evaluate"),
                    StageSpec("update", self.update, scalable=False)),
            reflect=StageSpec("reflect", self.repair.reflect), reflect_to="evaluate",
            merge_at="evaluate" if self.strategy.merges else None)

    # -- selection and budget -------------------------------------------------------------
    def admitted(self, item: WorkItem) -> None:
        if self.chain is not None:
            self.chain.start(item)

    def abandoned(self, item: WorkItem) -> None:
        if item.speculative is not None:
            self.speculation.abandon(item)
        if self.spec_rollout is not None:  # hook: late rollout answers of an item that ends unevaluated
            self.spec_rollout.ended(item)

    def ended(self, item: WorkItem) -> None:
        super().ended(item)
        self.audit.ended(item)

    def head_text(self, item: WorkItem) -> str:
        return gated_chain.head_text(self.ctx, item)

    def estimate(self) -> dict[str, float]:
        """Worst-case cost of one item: minibatch twice (once without a gate), one proposal,
        full validation."""
        ctx = self.ctx
        batches = 2 if self.strategy.acceptance.gated else 1
        calls = 1 + (self.chain.estimate_calls() if self.chain is not None
                     else batches * ctx.config.pipeline.minibatch_size + len(ctx.task.val))
        t = ctx.tally
        per_call = (t.prompt_tokens + t.completion_tokens) / t.llm_calls if t.llm_calls else TOKENS_PER_CALL_PRIOR
        llm = calls + self.strategy_calls  # the strategy's own stages call the LLM, never the metric
        llm += textgrad.extra_proposal_calls(ctx.task.seed_components)  # a textgrad step is two calls
        return {"proposals": 1, "llm_calls": llm, "metric_calls": calls - 1, "tokens": llm * per_call}

    def select_merge(self) -> dict | None:
        """A merge of two fully validated front artifacts with a common ancestor, or None."""
        ctx = self.ctx
        plan = merge.plan_merge(ctx.pool, self.merge_weights(), ctx.merges.tried, ctx.rng)
        if plan is not None and self.strategy.acceptance.gated:  # gate batch: validation examples where the two parents differ
            plan["minibatch"] = merge.differing_examples(ctx.pool.get(plan["ours"]), ctx.pool.get(plan["theirs"]),
                                                         ctx.task.val_ids, ctx.config.pipeline.merge_minibatch_size,
                                                         ctx.rng)
        return plan

    def estimate_merge(self) -> dict[str, float]:
        """Worst-case cost of one merge: its gate batch and full validation, no proposal."""
        gate = self.ctx.config.pipeline.merge_minibatch_size if self.strategy.acceptance.gated else 0
        calls = gate + len(self.ctx.task.val)
        per = self.estimate()
        per_call = per["tokens"] / per["llm_calls"]
        return {"llm_calls": calls, "metric_calls": calls, "tokens": calls * per_call}

    async def evaluate_seed(self) -> None:
        """Score the seed prompt on the validation set and commit it as pool version 1."""
        ctx = self.ctx
        current_item.set(None)
        try:
            traces = await run_examples(ctx, ctx.task.seed_prompt, ctx.task.val_ids, "evaluate")
        except CallFailed as exc:
            raise FatalRunError(f"the seed prompt could not be evaluated ({exc}); check the endpoint, "
                                "then `evotui resume`") from None
        seed = Artifact(
            artifact_id="a000000",
            text=ctx.task.seed_prompt,
            components=ctx.task.seed_components,
            parent_ids=(),
            created_version=0,
            val_scores={t["example_id"]: t["score"] for t in traces},
            status="seed",
            created_at=time.time(),
        )
        self.ledger.seed(seed, {t["example_id"]: t["feedback"] for t in traces})

    # -- shared ---------------------------------------------------------------------------
    async def run_example(self, prompt_text: str, example_id: str, stage: str) -> dict:
        return await run_example(self.ctx, prompt_text, example_id, stage)

    # -- stages ---------------------------------------------------------------------------
    async def rollout(self, item: WorkItem) -> WorkItem | None:
        parent = self.ctx.pool.get(item.parent_id)
        text = self.head_text(item)
        traces = await (self.spec_rollout.run(item, text) if self.spec_rollout is not None  # hook: released early
                        else run_examples(self.ctx, text, item.minibatch, "rollout"))
        # The id read before the await: the parent may be removed (speculation) meanwhile.
        item.rollout = Rollout(traces, [t["score"] for t in traces], parent.artifact_id)
        if all(t["score"] >= self.ctx.task.max_score for t in traces):
            # GEPA skips reflection when the parent is already perfect on the minibatch.
            self.ctx.tally.skipped += 1
            item.end("skipped", "parent perfect on minibatch")
            return None
        return item

    async def propose(self, item: WorkItem) -> WorkItem | None:
        ctx = self.ctx
        if self.recorder.proposal_done(item):
            return self.resumed_proposal(item)
        parent = ctx.pool.get(item.parent_id)
        ctx.bus.publish(ev.ProposalStart(item_id=item.item_id, parent_id=parent.artifact_id))
        current = self.head_text(item)
        others = [(a.artifact_id, a.val_mean, a.text) for a in self.inspirations(parent)]
        parts = components.parse_rendering(current, parent.components) if parent.components else None
        if parts is not None:
            targets = self.pick_components(parent, parts, item)
            messages = reflection.build_component_messages(ctx.task.description, parts, targets,
                                                           item.rollout.traces, others)
            messages = self.with_component_rules(messages, parts, targets)
            if textgrad.uses_textgrad(parts, targets):  # the component's optimizer (engine/stages/textgrad.py)
                messages = textgrad.build_gradient_messages(ctx.task.description, parts, targets[0],
                                                            item.rollout.traces)
        else:
            messages = reflection.build_messages(ctx.task.description, current, item.rollout.traces, others)
        messages = await self.with_guidance(messages, item)
        reason = ""
        child = res = None
        try:
            if parts is not None and textgrad.uses_textgrad(parts, targets):
                res, reason = await textgrad.step(self, item, parts, targets[0], messages)
            else:
                res = await ctx.reflection_llm.chat(messages, stage="propose", shrink=middle_out)
            if reason:
                pass
            elif res.finish_reason == "length":
                reason = "truncated (finish_reason=length)"
            elif parts is not None:
                child, changed, reason = reflection.parse_component_reply(res.text, parts, targets)
                if child is not None:
                    child, changed, reason = self.enforce_component_rules(parts, child, changed, item)
                if child is not None:
                    item.amend_proposal(changed_components=changed)
            else:
                child = reflection.parse_instructions(res.text)
                if child is None:
                    reason = "no parsable instructions block"
                elif child.strip() == current.strip():
                    child, reason = None, "no change from parent"
        except LLMError as exc:
            stop_if_fatal(exc)
            reason = f"LLM error: {exc.kind}"
        if child is not None:
            item.amend_proposal(child=child)
        else:
            item.reason = reason
        # Charged once the call is over: a proposal cut short by a stop is redone, not paid twice.
        self.recorder.charge_proposal(item, made=child is not None)
        self.audit.proposal(item, current, res.text if res is not None else None)
        ctx.bus.publish(ev.ProposalEnd(item_id=item.item_id, parent_id=parent.artifact_id, ok=child is not None, reason=reason))
        return self.proposal_outcome(item)

    def pick_components(self, parent: Artifact, parts: components.Components, item: WorkItem) -> list[str]:
        """The evolvable components this proposal rewrites: all, or the parent's next one in
        turn (GEPA's round robin)."""
        if self.ctx.config.pipeline.component_selection == "all":
            return components.evolvable(parts)
        return [self.choose_component(components.evolvable(parts), self.next_component(parent, parts, item), item)]

    def resumed_proposal(self, item: WorkItem) -> WorkItem | None:
        """An item re-enqueued after its proposal was charged: on it goes, without a new call
        (the resume counted its proposal from the rows already)."""
        return item if item.charged == "made" else self.proposal_outcome(item)

    async def evaluate(self, item: WorkItem) -> WorkItem | None:
        ctx = self.ctx
        if self.spec_rollout is not None:  # hook: the whole minibatch's rollout before the gate
            await self.spec_rollout.join(item)
        if self.chain is not None and not item.is_merge:
            return await self.chain.evaluate(item)
        child = item.proposal.child
        if not self.strategy.acceptance.gated:
            self.record_validation(item, await self.full_validation(item, child))
            return item
        ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="minibatch", n_examples=len(item.minibatch)))
        if item.merge is not None:
            # Gate of a merge: its batch against the better of both parents, whose scores on these
            # validation examples are known; a tie passes (it unites two validated edits).
            m = item.merge
            mb = await run_examples(self.ctx, child, item.minibatch, "evaluate")
            parent_side = max((Evidence.of_scores(item.minibatch, [ctx.pool.get(side).val_scores.get(ex, 0.0)
                                                                   for ex in item.minibatch])
                               for side in (m.ours, m.theirs)), key=lambda side: side.total)
        else:
            if item.rollout.parent_mb_of != item.parent_id:
                # Rebased by reflection onto another parent: the gate needs that parent's scores.
                new_parent = ctx.pool.get(item.parent_id)
                base, mb = await asyncio.gather(
                    run_examples(self.ctx, new_parent.text, item.minibatch, "evaluate"),
                    run_examples(self.ctx, child, item.minibatch, "evaluate"),
                )
                item.rollout = replace(item.rollout, parent_mb=[t["score"] for t in base],
                                       parent_mb_of=new_parent.artifact_id)
                parent_side = Evidence.of_traces(base)
            else:
                mb = await run_examples(self.ctx, child, item.minibatch, "evaluate")
                parent_side = self.rollout_side(item)
        child_sum = sum(t["score"] for t in mb)
        item.gate = GateScores(child_mb=[t["score"] for t in mb])
        ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="minibatch", score=child_sum / max(1, len(mb))))
        refused = self.gate(Evidence.of_traces(mb), parent_side, item)
        if refused is not None:
            self.reject(item, f"minibatch gate: {refused}")
            return None
        self.record_validation(item, await self.full_validation(item, child))
        self.audit.evaluation(item, True)
        return item

    # -- what the chain asks of a kind (engine/capabilities/gated_chain.py: ChainHost) ------------
    def start_side(self, text: str, ids: list[str], stage: str, capture: bool) -> list[Part]:
        """One part per example: the gate can decide as each answer arrives."""
        async def one(ex: str) -> Answers:
            return Answers([await self.run_example(text, ex, stage)])
        return [(asyncio.ensure_future(one(ex)), 1) for ex in ids]

    async def validate(self, item: WorkItem, text: str, width: int | None) -> None:
        self.record_validation(item, await self.full_validation(item, text, width))
        self.audit.evaluation(item, True)  # a chain head passed its gate: its evaluate row

    def handed_on(self, item: WorkItem, answers: Answers) -> None:
        return None  # the next step's traces are its rollout: all a prompt proposal needs

    def reject(self, item: WorkItem, reason: str) -> None:
        """A candidate that failed its gate: counted, announced, ended."""
        self.ctx.tally.rejected += 1
        self.ctx.bus.publish(ev.CandidateRejected(item_id=item.item_id, parent_id=item.parent_id, reason=reason))
        item.end("rejected", reason)

    def record_validation(self, item: WorkItem, val: list[dict]) -> None:
        """Full-validation scores and feedback on the item, for update() to commit."""
        item.validation = Validation({t["example_id"]: t["score"] for t in val},
                                     {t["example_id"]: t["feedback"] for t in val})
        mean = sum(item.validation.val.values()) / len(val)
        self.ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="val", score=mean))

    async def validation_traces(self, parts: components.Components) -> list[dict]:
        """A hot-swapped edit on the whole validation set (engine/components/hot_swap.py)."""
        return await run_examples(self.ctx, components.render(parts), list(self.ctx.task.val_ids), "evaluate")

    async def full_validation(self, item: WorkItem, child: str, width: int | None = None) -> list[dict]:
        """Full validation, `width` rollouts at a time if given; with speculation, the prefix
        first and a speculative insert if it beats the pool's best, then the rest (the same
        requests either way)."""
        ctx = self.ctx
        cfg = ctx.config.pipeline
        order = ctx.val_order.order if ctx.val_order is not None else ctx.task.val_ids
        ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="val", n_examples=len(order)))
        if not cfg.speculation or ctx.val_order is None:
            val = await run_examples(self.ctx, child, order, "evaluate", width)
        else:
            cut = ctx.val_order.prefix_size(cfg.spec_alpha)
            prefix = await run_examples(self.ctx, child, order[:cut], "evaluate", width)
            partial = sum(t["score"] for t in prefix) / len(prefix)
            best = ctx.pool.best()
            if cut < len(order) and best is not None and partial > best.val_mean:
                self.speculation.insert(item, child, prefix, partial, best.val_mean,
                                          self.child_components(item)[0])
            val = prefix + await run_examples(self.ctx, child, order[cut:], "evaluate", width)
        if ctx.val_order is not None:
            ctx.val_order.record({t["example_id"]: t["score"] for t in val})
        return val

    async def update(self, item: WorkItem) -> None:
        artifact_id = f"a{item.item_id[1:]}"
        if item.speculative is not None:
            if not self.speculation.settle(item):
                item.end("removed_speculative", "full validation did not confirm the partial score")
                return None
            self.audit.commit(item, artifact_id)
            return self._accepted(item, artifact_id)
        parts, part_meta = self.child_components(item)
        art = Artifact(
            artifact_id=artifact_id,
            text=item.proposal.child,
            parent_ids=merge.parent_ids(item),
            created_version=0,
            val_scores=item.validation.val,
            created_at=time.time(),
            meta={**self.artifact_meta(item),
                  **({"rebased": item.proposal.rebased} if item.proposal.rebased is not None else {}), **part_meta},
            components=parts,
        )
        self.ledger.commit(item, art, item.validation.val_feedback)
        self.audit.commit(item, artifact_id)
        if self.chain is not None:
            self.chain.committed(item, artifact_id)
        return self._accepted(item, artifact_id)

    def child_components(self, item: WorkItem) -> tuple[components.Components | None, dict]:
        """The child's components, read back from its text (a rendering) with its parent's names,
        so reflection patches, merges, chain rebases and reviewers' edits all keep them; and the
        meta that says which changed. A text whose headers no longer match (a reviewer removed
        one) is kept whole as one component: the text is what was validated."""
        parent = self.ctx.pool.get(item.parent_id)
        if parent.components is None:
            return None, {}
        parts = components.parse_rendering(item.proposal.child, parent.components)
        if parts is None:
            return None, {"components_lost": "the text no longer has its parent's component headings"}
        meta: dict = {"changed_components": components.changed(parent.components, parts)}
        for key in ("next_component", "refused_components"):
            if getattr(item.proposal, key) is not None:
                meta[key] = getattr(item.proposal, key)
        return parts, meta

    def _accepted(self, item: WorkItem, artifact_id: str) -> None:
        """The ledger counted and announced the artifact; the item ends accepted."""
        item.artifact_id = artifact_id
        item.end("accepted")
        return None


def evaluation_rows(art: Artifact, feedback: Mapping[str, str]) -> list[EvalRow]:
    """Evaluations of a prompt artifact: one validation row per example."""
    return [(ex, "val", score, feedback.get(ex, ""), "evaluate") for ex, score in art.val_scores.items()]
