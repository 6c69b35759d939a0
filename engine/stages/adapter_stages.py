"""Stage handlers of the adapter kind: a GEPA-style adapter scores and traces the candidates.

The candidate is a dict of named texts (a multi-component artifact, engine/components/__init__.py).
rollout: `adapter.evaluate(minibatch, candidate, capture_traces=True)`; propose: the adapter's
reflective dataset for one component (round robin, as GEPA) becomes a reflection prompt (or the
adapter's own `propose_new_texts`); evaluate: the strategy's minibatch gate, then
`adapter.evaluate(valset, ...)`; update: the ledger commits. Adapters are synchronous code, so
every call runs in a worker thread; a broken adapter stops the run with exit code 2. In mode
chain the gate is engine/capabilities/gated_chain.py, each side one `adapter.evaluate` call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping

from engine import components
from engine import events as ev
from engine.capabilities import gated_chain
from engine.capabilities.audit import Audit
from engine.capabilities.chain_gate import Answers, Part
from engine.capabilities.gated_chain import GatedChain
from engine.capabilities.reflective_repair import ReflectiveRepair
from engine.capabilities.speculation import Speculation
from engine.context import RunContext, stop_if_fatal
from engine.components.hot_swap import HotSwapError, PinnedParents
from engine.items import GateScores, Rollout, Validation, WorkItem, current_item
from engine.llm.errors import LLMError
from engine.llm.shrink import middle_out
from engine.pipeline.spec import PipelineSpec, StageSpec
from engine.pool import Artifact
from engine.selection import merge
from engine.stages import reflection
from engine.stages.adapter_protocol import AdapterError, build_messages, check_batch, shown
from engine.stages.base import KindHandlers
from engine.stages.example_kinds import ExampleKindMixin
from engine.stages.prompt_stages import TOKENS_PER_CALL_PRIOR, evaluation_rows
from engine.strategy.protocols import Evidence, Strategy
from engine.tasks.adapter_task import as_candidate

class AdapterStages(PinnedParents, ExampleKindMixin, KindHandlers):
    """Handlers of an adapter task running `strategy` (engine/pipeline/spec.py: SearchHandlers)."""

    kind = "adapter"

    def __init__(self, ctx: RunContext, strategy: Strategy) -> None:
        super().__init__(ctx, strategy, evaluation_rows)
        self.adapter = ctx.task.adapter
        self._batches: dict[str, Any] = {}
        """item id -> the adapter's own rollout result, for its make_reflective_dataset (kept
        in memory: trajectories are arbitrary objects, never stored)."""
        self._next_component: dict[str, int] = {}
        self.chain = GatedChain(self) if self.mode.chains else None
        self.repair = ReflectiveRepair(self)
        self.audit = Audit(ctx, strategy)
        self.speculation = Speculation(self)
        self._threads = ThreadPoolExecutor(max_workers=ctx.config.pipeline.adapter_threads,
                                           thread_name_prefix="evotui-adapter")
        """The adapter's evaluate calls: its own pool, so many batches (and slices) run at once."""

    def pipeline(self) -> PipelineSpec:
        return PipelineSpec(
            stages=(StageSpec("rollout", self.rollout), *self.strategy_stages("before_propose"),
                    StageSpec("propose", self.propose, checks_staleness=True),
                    StageSpec("evaluate", self.evaluate, checks_staleness=True), *self.strategy_stages("after_evaluate"),
                    StageSpec("update", self.update, scalable=False)),
            reflect=StageSpec("reflect", self.repair.reflect), reflect_to="evaluate")

    def admitted(self, item: WorkItem) -> None:
        if self.chain is not None:
            self.chain.start(item)

    def abandoned(self, item: WorkItem) -> None:
        self._batches.pop(item.item_id, None)
        if item.speculative is not None:
            self.speculation.abandon(item)

    def ended(self, item: WorkItem) -> None:
        self._batches.pop(item.item_id, None)  # a chain step handed traces to an item that never proposed
        super().ended(item)
        self.audit.ended(item)

    def head_parts(self, item: WorkItem) -> components.Components:
        """The components an item improves: its chain head's, else its pool parent's."""
        parent = self.ctx.pool.get(item.parent_id)
        parts = components.parse_rendering(gated_chain.head_text(self.ctx, item), parent.parts)
        return parts if parts is not None else parent.parts

    def estimate(self) -> dict[str, float]:
        """Worst case of one item: the minibatch twice (once without a gate), full validation,
        one proposal."""
        ctx = self.ctx
        batches = 2 if self.strategy.acceptance.gated else 1
        metric = (self.chain.estimate_calls() if self.chain is not None
                  else batches * ctx.config.pipeline.minibatch_size + len(ctx.task.val))
        t = ctx.tally
        per_call = (t.prompt_tokens + t.completion_tokens) / t.llm_calls if t.llm_calls else TOKENS_PER_CALL_PRIOR
        llm = 1 + self.strategy_calls
        return {"proposals": 1, "llm_calls": llm, "metric_calls": metric, "tokens": llm * per_call}

    async def aclose(self) -> None:
        # A call still in the adapter's code cannot be interrupted; it is not waited for.
        self._threads.shutdown(wait=False, cancel_futures=True)
        await super().aclose()

    def select_merge(self) -> dict | None:
        return None  # merges of adapter candidates are not built (the pipeline declares none)

    def estimate_merge(self) -> dict[str, float]:
        return {"llm_calls": 0, "metric_calls": 0, "tokens": 0}

    # -- the adapter ------------------------------------------------------------------------
    async def run_batch(self, candidate: dict[str, str], ids: list[str], capture: bool) -> tuple[Any, list[dict]]:
        """(the adapter's result, one trace per example); metric calls charged per example."""
        ctx = self.ctx
        batch = [ctx.task.example(i) for i in ids]
        split = ctx.config.pipeline.adapter_split
        if capture or split is None or len(batch) <= split:
            result = await self._evaluate(batch, candidate, capture)
            outputs, scores, _ = check_batch(result, len(ids), capture)
        else:
            # Untraced batches (validation, gates) in slices evaluated at once: an adapter that
            # answers a batch one request at a time (GEPA's DefaultAdapter with a callable model)
            # then has its examples in flight together. Scores are per example either way.
            slices = [batch[k:k + split] for k in range(0, len(batch), split)]
            results = await asyncio.gather(*(self._evaluate(b, candidate, False) for b in slices))
            checked = [check_batch(r, len(b), False) for r, b in zip(results, slices)]
            result, outputs, scores = None, [o for c in checked for o in c[0]], [x for c in checked for x in c[1]]
        ctx.tally.metric_calls += len(ids)
        ctx.budget.charge("metric_calls", len(ids), ctx.reservations.get(current_item.get() or ""))
        traces = [{"example_id": i, "input": shown(ex), "output": shown(out), "score": s, "feedback": ""}
                  for i, ex, out, s in zip(ids, batch, outputs, scores)]
        return result, traces

    async def _evaluate(self, batch: list, candidate: dict[str, str], capture: bool) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._threads, self.adapter.evaluate, batch, dict(candidate), capture)
        except Exception as exc:  # the caller's code: its failure is the run's reason, not a crash
            raise AdapterError(f"adapter.evaluate raised {type(exc).__name__}: {exc}") from exc

    async def validation_traces(self, parts: components.Components) -> list[dict]:
        """A hot-swapped edit on the whole validation set (engine/components/hot_swap.py). The adapter failing
        on the edit refuses the edit; it does not fail the run, as it would for a proposal."""
        try:
            _, traces = await self.run_batch(as_candidate(parts), self.ctx.task.val_ids, False)
        except AdapterError as exc:
            raise HotSwapError(f"the adapter could not evaluate the edit: {exc}") from None
        return traces

    async def evaluate_seed(self) -> None:
        ctx = self.ctx
        current_item.set(None)
        parts = ctx.task.seed_components
        _, traces = await self.run_batch(as_candidate(parts), ctx.task.val_ids, False)
        seed = Artifact(artifact_id="a000000", text=components.render(parts), components=parts, parent_ids=(),
                        created_version=0, val_scores={t["example_id"]: t["score"] for t in traces},
                        status="seed", created_at=time.time())
        self.ledger.seed(seed, {t["example_id"]: f"output: {t['output']}" for t in traces})

    # -- stages -----------------------------------------------------------------------------
    async def rollout(self, item: WorkItem) -> WorkItem | None:
        parent_id = item.parent_id  # read before the await, as the prompt kind does
        result, traces = await self.run_batch(as_candidate(self.head_parts(item)), item.minibatch, True)
        item.rollout = Rollout(traces, [t["score"] for t in traces], parent_id)
        if all(t["score"] >= self.ctx.task.max_score for t in traces):
            self.ctx.tally.skipped += 1
            item.end("skipped", "parent perfect on minibatch")
            return None
        self._batches[item.item_id] = result
        return item

    def pick_component(self, parent: Artifact, item: WorkItem) -> str:
        """GEPA's round robin over the parent's components, unless the strategy chooses (SEPL's
        blame)."""
        parts = self.head_parts(item)
        return self.choose_component(components.evolvable(parts), self.next_component(parent, parts, item), item)

    async def propose(self, item: WorkItem) -> WorkItem | None:
        ctx = self.ctx
        if self.recorder.proposal_done(item):
            return item if item.charged == "made" else self.proposal_outcome(item)
        parent = ctx.pool.get(item.parent_id)
        ctx.bus.publish(ev.ProposalStart(item_id=item.item_id, parent_id=parent.artifact_id))
        parts = self.head_parts(item)
        target = self.pick_component(parent, item)
        batch = self._batches.pop(item.item_id, None)
        child, reason = None, ""
        if batch is None:
            reason = "rollout traces lost (the item was restored)"
        else:
            candidate = as_candidate(parts)
            dataset = await self._reflective_dataset(candidate, batch, target)
            child, reason = await self._new_text(item, candidate, parts, target, dataset)
        if child is not None:
            item.amend_proposal(child=child, changed_components=[target])
        else:
            item.reason = reason
        self.recorder.charge_proposal(item, made=child is not None)
        self.audit.proposal(item, components.render(parts), None)
        ctx.bus.publish(ev.ProposalEnd(item_id=item.item_id, parent_id=parent.artifact_id, ok=child is not None,
                                       reason=reason))
        return self.proposal_outcome(item)

    async def _reflective_dataset(self, candidate: dict[str, str], batch: Any, target: str) -> list[dict]:
        try:
            dataset = await asyncio.to_thread(self.adapter.make_reflective_dataset, candidate, batch, [target])
        except Exception as exc:  # the caller's code
            raise AdapterError(f"adapter.make_reflective_dataset raised {type(exc).__name__}: {exc}") from exc
        records = dataset.get(target) if isinstance(dataset, Mapping) else None
        if not isinstance(records, (list, tuple)) or not all(isinstance(r, Mapping) for r in records):
            raise AdapterError(f"adapter.make_reflective_dataset must return {{component name: [dict, ...]}} "
                               f"with an entry for {target!r}")
        return [dict(r) for r in records]

    async def _new_text(self, item: WorkItem, candidate: dict[str, str], parts: components.Components, target: str,
                        dataset: list[dict]) -> tuple[str | None, str]:
        """(the child's rendering, "") or (None, why not)."""
        ctx = self.ctx
        own = ctx.task.propose_new_texts
        if own is not None:
            try:
                texts = await asyncio.to_thread(own, candidate, {target: dataset}, [target])
            except Exception as exc:  # the caller's code
                raise AdapterError(f"adapter.propose_new_texts raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(texts, Mapping) or not isinstance(texts.get(target), str):
                raise AdapterError(f"adapter.propose_new_texts must return {{component name: text}} with {target!r}")
            reply = f"```\n{texts[target]}\n```"
        else:
            messages = self.with_component_rules(build_messages(ctx.task.description, parts, target, dataset), parts,
                                                 [target])
            messages = await self.with_guidance(messages, item)
            try:
                res = await ctx.reflection_llm.chat(messages, stage="propose", shrink=middle_out)
            except LLMError as exc:
                stop_if_fatal(exc)
                return None, f"LLM error: {exc.kind}"
            if res.finish_reason == "length":
                return None, "truncated (finish_reason=length)"
            reply = res.text
        child, changed, reason = reflection.parse_component_reply(reply, parts, [target])
        if child is not None:  # the adapter's own proposer is held to the same rules
            child, _, reason = self.enforce_component_rules(parts, child, changed, item)
        return child, reason

    async def evaluate(self, item: WorkItem) -> WorkItem | None:
        ctx = self.ctx
        parent = ctx.pool.get(item.parent_id)
        parts = components.parse_rendering(item.proposal.child, parent.parts)
        if parts is None:  # a reflective repair lost the headings (it refuses that; kept as a guard)
            self.reject(item, "the candidate no longer has its parent's components")
            return None
        if self.chain is not None and not item.is_merge:
            return await self.chain.evaluate(item)
        candidate = as_candidate(parts)
        if self.strategy.acceptance.gated:
            ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="minibatch", n_examples=len(item.minibatch)))
            parent_side = self.rollout_side(item)
            if item.rollout.parent_mb_of != parent.artifact_id:
                # Rebased by reflection onto another parent: the gate needs that parent's scores.
                _, base = await self.run_batch(as_candidate(parent.parts), item.minibatch, False)
                item.rollout = replace(item.rollout, parent_mb=[t["score"] for t in base],
                                       parent_mb_of=parent.artifact_id)
                parent_side = Evidence.of_traces(base)
            _, mb = await self.run_batch(candidate, item.minibatch, False)
            child_sum = sum(t["score"] for t in mb)
            item.gate = GateScores(child_mb=[t["score"] for t in mb])
            ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="minibatch",
                                             score=child_sum / max(1, len(mb))))
            refused = self.gate(Evidence.of_traces(mb), parent_side, item)
            if refused is not None:
                self.reject(item, f"minibatch gate: {refused}")
                return None
        await self.validate(item, item.proposal.child, None)
        return item

    # -- what the chain asks of a kind (engine/capabilities/gated_chain.py: ChainHost) ------------
    def start_side(self, text: str, ids: list[str], stage: str, capture: bool) -> list[Part]:
        """One part per side: the adapter scores a batch in one call."""
        async def side() -> Answers:
            parts = components.parse_rendering(text, self.ctx.task.seed_components)
            if parts is None:
                raise AdapterError("a chain head lost the candidate's component headings")
            result, traces = await self.run_batch(as_candidate(parts), ids, capture)
            return Answers(traces, [result] if capture else [])
        return [(asyncio.ensure_future(side()), len(ids))]

    async def validate(self, item: WorkItem, text: str, width: int | None) -> None:
        """Full validation (`width` is for kinds that run examples one by one). With speculation,
        the validation order's prefix first and a speculative insert if it beats the pool's best
        (engine/capabilities/speculation.py), then the rest: the same examples either way."""
        ctx = self.ctx
        parts = components.parse_rendering(text, ctx.pool.get(item.parent_id).parts)
        assert parts is not None  # evaluate and the chain checked it
        ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="val", n_examples=len(ctx.task.val_ids)))
        candidate, order = as_candidate(parts), ctx.val_order.order if ctx.val_order is not None else None
        if not ctx.config.pipeline.speculation or order is None or item.is_merge:
            _, val = await self.run_batch(candidate, ctx.task.val_ids, False)
        else:
            cut = ctx.val_order.prefix_size(ctx.config.pipeline.spec_alpha)
            _, prefix = await self.run_batch(candidate, order[:cut], False)
            partial, best = sum(t["score"] for t in prefix) / len(prefix), ctx.pool.best()
            if cut < len(order) and best is not None and partial > best.val_mean:
                self.speculation.insert(item, text, prefix, partial, best.val_mean, parts)
            rest = (await self.run_batch(candidate, order[cut:], False))[1] if cut < len(order) else []
            val = prefix + rest
            ctx.val_order.record({t["example_id"]: t["score"] for t in val})
        item.validation = Validation({t["example_id"]: t["score"] for t in val},
                                     {t["example_id"]: f"output: {t['output']}" for t in val})
        ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="val",
                                         score=sum(item.validation.val.values()) / len(val)))
        self.audit.evaluation(item, True)

    def handed_on(self, item: WorkItem, answers: Answers) -> None:
        """The next step's reflective dataset is made from the side's own EvaluationBatch."""
        if answers.native:
            self._batches[item.item_id] = answers.native[0]

    def reject(self, item: WorkItem, reason: str) -> None:
        self.ctx.tally.rejected += 1
        self.ctx.bus.publish(ev.CandidateRejected(item_id=item.item_id, parent_id=item.parent_id, reason=reason))
        item.end("rejected", reason)

    async def update(self, item: WorkItem) -> None:
        if item.speculative is not None:
            if not self.speculation.settle(item):
                item.end("removed_speculative", "full validation did not confirm the partial score")
                return None
            self.audit.commit(item, item.speculative.artifact_id)
            item.artifact_id = item.speculative.artifact_id
            item.end("accepted")
            return None
        parent = self.ctx.pool.get(item.parent_id)
        parts = components.parse_rendering(item.proposal.child, parent.parts)
        assert parts is not None  # evaluate checked it
        artifact_id = f"a{item.item_id[1:]}"
        meta = {**self.artifact_meta(item), "changed_components": components.changed(parent.parts, parts),
                "next_component": item.proposal.next_component or 0,
                **({"rebased": item.proposal.rebased} if item.proposal.rebased is not None else {})}
        art = Artifact(artifact_id=artifact_id, text=item.proposal.child, parent_ids=merge.parent_ids(item),
                       created_version=0, val_scores=item.validation.val, created_at=time.time(), meta=meta,
                       components=parts)
        self.ledger.commit(item, art, item.validation.val_feedback)
        self.audit.commit(item, artifact_id)
        if self.chain is not None:
            self.chain.committed(item, artifact_id)
        item.artifact_id = artifact_id
        item.end("accepted")
        return None
