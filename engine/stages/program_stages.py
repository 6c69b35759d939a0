"""Stage handlers of program tasks: propose -> validate -> evaluate -> update.

The strategy (engine/strategy/) picks the parent, chooses the other programs the proposer sees
(inspirations), may gate a candidate against its parent's score, and offers merges. propose
asks the LLM for a patch in the task's format and applies it, retrying a bounded number of
times with the precise per-block errors. validate runs the cheap filters (no-op, duplicate,
EVOLVE-BLOCK region, syntax) and, unless [program] cycling_guard is off, the cycling guard
(engine/code/cycling.py). evaluate runs the evaluator in the sandbox. update commits the
candidates that evaluated (and passed the strategy's gate); val_scores = {"combined_score":
fitness}, so Artifact.val_mean is the fitness (with cycling_guard = "penalise", the penalised
fitness; the raw one stays in meta metrics and raw_score). Same handler shape as PromptStages.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Mapping

from engine import events as ev
from engine.capabilities.program_chain import ProgramChain
from engine.capabilities.program_repair import ProgramRepair
from engine.capabilities.program_speculation import ProgramSpeculation
from engine.code import cycling
from engine.code.filters import ProgramFilters, Verdict
from engine.code.patches import apply_reply, unified_diff
from engine.context import FatalRunError, RunContext, stop_if_fatal
from engine.evaluator import (
    EXIT_EVALUATOR_LOST,
    EvaluatorLost,
    EvaluatorService,
    EvaluatorSetupError,
    build_evaluator,
)
from engine.items import WorkItem, current_item
from engine.ledger import EvalRow
from engine.llm.errors import LLMError
from engine.pipeline.spec import PipelineSpec, Selection, StageSpec
from engine.pool import Artifact
from engine.sandbox import EvalResult
from engine.selection import merge
from engine.stages import program_prompt as prompt
from engine.stages.executor_fix import fix_locally
from engine.stages.base import KindHandlers
from engine.stages.program_tried import TriedChanges
from engine.strategy.protocols import Evidence, Strategy

SANDBOX_FAILURES = ("sandbox setup failed", "cannot start the evaluator process", "sandbox confinement failed")
"""Seed failures that are the sandbox's, not the program's (engine/sandbox/core.py)."""

TOKENS_PER_CALL_PRIOR = 3000.0
SCORE_KEY = "combined_score"
META_TEXT_CAP = 2000


def _feedback_of(res: EvalResult) -> dict[str, str]:
    fb = {k: prompt.clip(v, META_TEXT_CAP) for k, v in res.feedback.items()}
    if res.warnings:
        fb["evotui_warnings"] = "; ".join(res.warnings)
    return fb


class ProgramStages(KindHandlers):
    kind = "program"

    def __init__(self, ctx: RunContext, strategy: Strategy, evaluator: EvaluatorService | None = None) -> None:
        super().__init__(ctx, strategy, evaluation_rows)
        self.task = ctx.task
        self.settings = ctx.task.settings
        # The run's key variables are dropped whatever they are called (not only *_API_KEY).
        keys = frozenset(ep.api_key_env for ep in (ctx.config.task_llm, ctx.config.reflection) if ep.api_key_env)
        # Where evaluations run ([evaluator]): the local sandbox or Ray tasks running the same sandbox.
        self.evaluator = evaluator or build_evaluator(ctx.config.evaluator, self.settings.limits(),
                                                      self.settings.eval_concurrency, keys)
        self.filters = ProgramFilters(max_length=self.settings.max_code_length, language=self.task.language,
                                      counts=ctx.program.filter_counts)
        for art in ctx.pool.artifacts():
            self.filters.remember(art.text)
        # In the run state (a resume shows the proposer the failures the killed session saw).
        self.failures = ctx.program.failures = deque(ctx.program.failures, maxlen=max(1, self.settings.num_failures))
        self.tried = TriedChanges(ctx.program.tried, self.settings.num_tried)
        self.guard = self.settings.cycling_guard
        self.history = cycling.LineageHistory(self._lineage)
        self.chain = ProgramChain(ctx, self.settings.chain_unjoinable == "evaluate") if self.mode.chains else None
        """mode chain: the shared head every step improves (engine/capabilities/program_chain.py)."""
        # A step is carried onto the newest head as it starts its evaluation, so steps wait in
        # the evaluate queue, not inside the sandbox's slots, where the head could move on again.
        self.chain_workers = {"evaluate": self.settings.eval_concurrency} if self.chain else {}
        self.repair = ProgramRepair(self)  # reflective policy's reflect stage (program_repair.py)
        self.speculation = ProgramSpeculation(self, self.chain)  # after early cascade stages (program_speculation.py)

    def _lineage(self, artifact_id: str) -> tuple[str, tuple[str, ...]] | None:
        pool = self.ctx.pool
        if artifact_id not in pool:
            return None
        art = pool.get(artifact_id)
        return art.text, tuple(art.parent_ids)

    def pipeline(self) -> PipelineSpec:
        return PipelineSpec(
            stages=(*self.strategy_stages("before_propose"), StageSpec("propose", self.propose, checks_staleness=True),
                    StageSpec("validate", self.validate), StageSpec("evaluate", self.evaluate, checks_staleness=True),
                    *self.strategy_stages("after_evaluate"), StageSpec("update", self.update, scalable=False)),
            reflect=StageSpec("reflect", self.reflect), reflect_to="evaluate",
            merge_at="validate" if self.strategy.merges else None)

    @property
    def instances(self) -> tuple[str, ...]:
        return (SCORE_KEY,)

    def child_score(self, item: WorkItem) -> float | None:
        return item.evaluation.score if item.evaluation is not None else None

    def figures(self) -> dict:
        """Where evaluations ran and the sandbox's isolation level (the program counters are in
        the run state): "sandbox" as before, the service's figures under "evaluator"."""
        figures = self.evaluator.figures()
        seed = self.ctx.pool.get(self.ctx.seed_id) if self.ctx.seed_id in self.ctx.pool else None
        failed = seed.meta.get("seed_failed") if seed is not None else None
        return {"sandbox": figures.get("sandbox", ""), "evaluator": figures,
                **({"seed_failed": failed} if failed else {})}

    async def aclose(self) -> None:
        await self.evaluator.aclose()

    # -- selection and budget -------------------------------------------------------------
    def select(self) -> Selection:
        """The parent the strategy picks; a program has no minibatch."""
        pick = self.pick_parent()
        return Selection(pick.parent_id, [], pick.tags)

    def estimate(self) -> dict[str, float]:
        t = self.ctx.tally
        per_call = (t.prompt_tokens + t.completion_tokens) / t.llm_calls if t.llm_calls else TOKENS_PER_CALL_PRIOR
        fixes = self.strategy.executor.fix_rounds if self.strategy.executor is not None else 0
        calls = 1 + self.settings.max_patch_retries + fixes + self.strategy_calls
        return {"proposals": 1, "llm_calls": calls, "metric_calls": 1, "tokens": calls * per_call}

    def select_merge(self) -> dict | None:
        """A line merge of two programs the strategy ranks (pairs with the best first), or None.
        It is validated (syntax, EVOLVE-BLOCK regions) and evaluated like any proposal."""
        ctx = self.ctx
        return merge.plan_merge(ctx.pool, self.merge_weights(), ctx.merges.tried, ctx.rng)

    def estimate_merge(self) -> dict[str, float]:
        """One evaluation, no LLM call."""
        return {"metric_calls": 1}

    async def run_evaluation(self, program: str, on_stage=None) -> EvalResult:
        """on_stage: called as cascade stages end (speculation), if the evaluator reports them."""
        s = self.settings
        try:
            res = await self.evaluator.evaluate(self.task.evaluator, program, mode=self.task.sandbox_mode,
                                                cascade=s.cascade, thresholds=s.cascade_thresholds,
                                                program_name=self.task.program_name, on_stage=on_stage)
        except EvaluatorLost as exc:
            # The item stays open (a FatalRunError leaves it so): resume submits it again.
            raise FatalRunError(str(exc), exit_code=EXIT_EVALUATOR_LOST) from None
        except EvaluatorSetupError as exc:
            raise FatalRunError(f"evaluations cannot run: {exc}", exit_code=2) from None
        ctx = self.ctx
        ctx.tally.metric_calls += 1
        ctx.budget.charge("metric_calls", 1, ctx.reservations.get(current_item.get() or ""))
        return res

    async def evaluate_seed(self) -> None:
        """Evaluate the initial program and commit it as pool version 1."""
        current_item.set(None)
        res = await self.run_evaluation(self.task.initial_program)
        meta = {"metrics": res.metrics, "feedback": _feedback_of(res), "eval_s": round(res.duration_s, 3)}
        if not res.ok:
            tail = " ".join(res.stderr_tail.strip().splitlines()[-3:])
            why = f"the initial program fails its evaluator: {res.reason}" + (f" (stderr: {tail[-300:]})" if tail else "")
            if self.settings.seed_must_pass or res.reason.startswith(SANDBOX_FAILURES):
                # A sandbox that cannot run anything would fail every proposal too: stop before any LLM call.
                raise FatalRunError(why, exit_code=2)
            # As OpenEvolve and ShinkaEvolve do: generation 0 scores 0 and the search goes on from it.
            meta["seed_failed"] = res.reason
            self.ctx.bus.publish(ev.Notice(level="warning", message=(
                f"{why}; it is generation 0 with score 0 and the run goes on "
                "([program] seed_must_pass = true stops here instead)")))
        seed = Artifact(artifact_id="a000000", text=self.task.initial_program, parent_ids=(), created_version=0,
                        val_scores={SCORE_KEY: res.score if res.ok else 0.0}, status="seed", created_at=time.time(),
                        meta=meta)
        self.ledger.seed(seed)
        self.filters.remember(seed.text)

    # -- propose ----------------------------------------------------------------------------
    def messages_for(self, parent: Artifact, item: WorkItem | None = None) -> list[dict]:
        """`item`: the one proposing (the other items in flight on this parent are listed as tried)."""
        s = self.settings
        meta = dict(parent.meta)
        return prompt.build_messages(
            system=prompt.system_message(s.system_message, s.patch_format, self.task.language),
            description=self.task.description,
            parent_id=parent.artifact_id, parent_code=parent.text, parent_score=parent.val_mean,
            metrics=dict(meta.get("metrics") or {}), feedback=dict(meta.get("feedback") or {}),
            last_change=str(meta.get("diff") or ""),
            others=[(a.artifact_id, a.val_mean, a.text) for a in self.inspirations(parent)], failures=list(self.failures),
            fmt=s.patch_format, max_chars=s.max_prompt_chars, language=self.task.language,
            removed=None if self.guard == "off" else
            self.history.removed_lines(parent.artifact_id, parent.text, prompt.REMOVED_SHOWN),
            tried=self.tried.for_parent(parent.artifact_id, [] if self.recorder is None else
                                        [o for o in self.recorder.in_flight.values() if o is not item]))

    async def propose(self, item: WorkItem) -> WorkItem | None:
        ctx, s = self.ctx, self.settings
        if self.recorder.proposal_done(item):
            # Charged before an interruption: on it goes without a new call (counted from the rows).
            if item.charged == "made":
                return item
            self._fail(item, item.why("proposal failed").split(":")[0], item.why("proposal failed"))
            return None
        parent = ctx.pool.get(item.parent_id)
        ctx.bus.publish(ev.ProposalStart(item_id=item.item_id, parent_id=parent.artifact_id))
        messages = await self.with_guidance(self.messages_for(parent, item), item)
        child, reason, errors = None, "", []
        for attempt in range(1 + s.max_patch_retries):
            try:
                res = await ctx.reflection_llm.chat(messages, stage="propose")
            except LLMError as exc:
                stop_if_fatal(exc)
                reason = f"LLM error: {exc.kind}"
                break
            if res.finish_reason == "length":
                reason = "truncated (finish_reason=length)"
                break
            patch = apply_reply(parent.text, res.text, s.patch_format, self.task.language)
            ctx.program.tolerant_blocks += patch.tolerant
            self.filters.counts["region"] += patch.region_violations
            if patch.ok:
                child = patch.text
                break
            errors = patch.errors
            reason = f"patch failed: {errors[0]}"
            if attempt < s.max_patch_retries:
                ctx.program.patch_retries += 1
                item.amend_proposal(patch_retries=attempt + 1)
                messages = prompt.retry_messages(messages, res.text, errors, s.patch_format)
        if child is not None and self.strategy.executor is not None:
            # The strategy's executor checks the candidate locally and repairs it (executor_fix.py).
            fixed = await fix_locally(ctx, self.strategy.executor, parent.text, parent.val_mean, messages, res.text,
                                      child, s.patch_format, self.task.language, self.task.path)
            item.amend_proposal(executor_fix=fixed.record)
            if fixed.record["outcome"] in ("repaired", "failed"):
                self.filters.counts[f"executor_{fixed.record['outcome']}"] += 1
            child, reason = fixed.child, fixed.reason or reason
        if child is not None:
            item.amend_proposal(child=child, diff=unified_diff(parent.text, child, parent.artifact_id, "child"))
        else:
            item.reason = reason
        # Charged once the LLM work is over, with its row: a kill before this redoes it, never twice.
        self.recorder.charge_proposal(item, made=child is not None)
        ctx.bus.publish(ev.ProposalEnd(item_id=item.item_id, parent_id=parent.artifact_id, ok=child is not None, reason=reason if child is None else ""))
        if child is None:
            self._fail(item, reason.split(":")[0], reason)
            return None
        ctx.tally.proposals += 1
        return item

    def _fail(self, item: WorkItem, kind: str, reason: str, detail: str = "") -> None:
        ctx = self.ctx
        ctx.tally.failed += 1
        ctx.tally.fail_reasons[kind] += 1
        line = f"{item.item_id} (from {item.parent_id}): {reason}"
        if detail:
            line += f"\n  stderr tail: {detail}"
        self.failures.append(line)
        self.tried.note(item, reason)
        item.end("failed", reason)

    # -- validate / evaluate / update -------------------------------------------------------
    async def validate(self, item: WorkItem) -> WorkItem | None:
        parent = self.ctx.pool.get(item.parent_id)
        child = item.proposal.child
        verdict = self.filters.check(parent.text, child,
                                     None if self.guard == "off" else lambda: self._cycling(item, parent, child))
        if not verdict.passed:
            self._fail(item, f"filter {verdict.kind}", verdict.reason)
            return None
        self.filters.remember(child)
        return item

    def _cycling(self, item: WorkItem, parent: Artifact, child: str) -> Verdict:
        """The cycling guard's check (after the cheaper filters passed): its finding goes into the
        item's evaluation record (warn / penalise use it later); reject turns a recycling child away here."""
        found = self.history.check(parent.artifact_id, parent.text, child)
        if not found.count:
            return Verdict(None)
        if self.guard == "reject":
            return Verdict("cycling", f"cycling: {found.count} of {found.added} added lines were deleted earlier "
                                      f"in this lineage, e.g. {prompt.clip(found.lines[0][0], 120)!r}")
        item.amend_evaluation(recycled_lines=found.meta())
        self.filters.counts["cycling_warned" if self.guard == "warn" else "cycling_penalised"] += 1
        return Verdict(None)

    def admitted(self, item: WorkItem) -> None:
        if self.chain is not None:
            self.chain.start(item)

    def abandoned(self, item: WorkItem) -> None:
        self.speculation.abandon(item)

    def ended(self, item: WorkItem) -> None:
        if self.chain is not None:
            self.chain.ended(item)
        super().ended(item)

    def _rebase(self, item: WorkItem) -> str:
        """mode chain: the candidate on the newest head, checked again ("" when it may go on)."""
        reason = self.chain.rebase(item) if self.chain is not None else ""
        if reason or item.proposal.rebased is None or item.proposal.rebase_checked:
            return reason
        item.amend_proposal(rebase_checked=True)
        verdict = self.filters.check(self.ctx.pool.get(item.parent_id).text, item.proposal.child)
        if not verdict.passed:
            return f"rebased onto the newer head: filter {verdict.kind}: {verdict.reason}"
        self.filters.remember(item.proposal.child)
        return ""

    async def evaluate(self, item: WorkItem) -> WorkItem | None:
        ctx = self.ctx
        unjoinable = self._rebase(item)
        if unjoinable:
            self.tried.note(item, unjoinable)
            ctx.tally.rejected += 1
            ctx.bus.publish(ev.CandidateRejected(item_id=item.item_id, parent_id=item.parent_id, reason=unjoinable))
            item.end("rejected", unjoinable)
            return None
        ctx.bus.publish(ev.EvaluationStart(item_id=item.item_id, split="program", n_examples=1))
        res = await self.run_evaluation(item.proposal.child, self.speculation.on_stage(item))
        item.amend_evaluation(eval_s=round(res.duration_s, 3))
        if not res.ok:
            tail = " | ".join(res.stderr_tail.strip().splitlines()[-4:])[-600:]
            ctx.bus.publish(ev.CandidateRejected(item_id=item.item_id, parent_id=item.parent_id, reason=res.reason))
            self._fail(item, "evaluation failed", f"evaluation failed: {res.reason}", tail)
            return None
        ctx.bus.publish(ev.EvaluationEnd(item_id=item.item_id, split="program", score=res.score))
        score = res.score
        recycled = item.evaluation.recycled_lines
        if self.guard == "penalise" and recycled:
            # The pool (val_scores, the gate, selection) sees the penalised score; the raw one
            # stays in the metrics and in meta raw_score.
            item.amend_evaluation(raw_score=score)
            score = cycling.penalised(score, recycled["share"], self.settings.cycling_penalty)
        refused = (self.gate(Evidence({"program": score}), Evidence({"program": self._parent_score(item)}), item)
                   if self.strategy.acceptance.gated else None)
        if refused is not None:
            ctx.tally.rejected += 1
            reason = f"score gate: {refused}"
            self.tried.scored(item, score, self._parent_score(item))
            ctx.bus.publish(ev.CandidateRejected(item_id=item.item_id, parent_id=item.parent_id, reason=reason))
            item.end("rejected", reason)
            return None
        item.amend_evaluation(score=score, metrics=res.metrics, feedback=_feedback_of(res))
        return item

    def _parent_score(self, item: WorkItem) -> float:
        """The score a gated candidate must beat: its parent's (a merge's better parent's)."""
        pool = self.ctx.pool
        if item.merge is not None:
            return max(pool.get(item.merge.ours).val_mean, pool.get(item.merge.theirs).val_mean)
        return pool.get(item.parent_id).val_mean

    async def update(self, item: WorkItem) -> None:
        artifact_id = f"a{item.item_id[1:]}"
        evaluation = item.evaluation
        meta = {**self.artifact_meta(item), "metrics": evaluation.metrics,
                "feedback": evaluation.feedback, "diff": prompt.clip(item.proposal.diff or "", 4000),
                "patch_format": self.settings.patch_format, "patch_retries": item.proposal.patch_retries or 0,
                "eval_s": evaluation.eval_s,
                **{k: getattr(evaluation, k) for k in ("recycled_lines", "raw_score")
                   if getattr(evaluation, k) is not None},
                **({"executor_fix": item.proposal.executor_fix} if item.proposal.executor_fix is not None else {})}
        self.tried.scored(item, evaluation.score, self._parent_score(item))
        if item.speculative is not None:  # in the pool since an early cascade stage: confirmed now
            self.speculation.settle(item, evaluation.score, meta)
        else:
            art = Artifact(artifact_id=artifact_id, text=item.proposal.child, parent_ids=merge.parent_ids(item),
                           created_version=0, val_scores={SCORE_KEY: evaluation.score}, created_at=time.time(),
                           meta=meta)
            self.ledger.commit(item, art)  # counted and announced there
        item.artifact_id = artifact_id
        if self.chain is not None:
            self.chain.committed(item, artifact_id, evaluation.score)
        item.end("accepted")
        return None

    async def reflect(self, item: WorkItem) -> WorkItem | None:
        """Reflective policy: the LLM keeps, patches onto the current best or discards a stale
        proposal (hook; the logic is in engine/capabilities/program_repair.py)."""
        return await self.repair.reflect(item)


def evaluation_rows(art: Artifact, _feedback: Mapping[str, str]) -> list[EvalRow]:
    """Evaluations of a program: its fitness (with the evaluator's feedback) and each metric."""
    feedback = dict(art.meta.get("feedback") or {})
    text = "; ".join(f"{k}: {v}" for k, v in feedback.items())[:META_TEXT_CAP]
    rows: list[EvalRow] = [(SCORE_KEY, "program", art.val_mean, text, "evaluate")]
    rows += [(k, "metric", float(v), None, "evaluate") for k, v in dict(art.meta.get("metrics") or {}).items()]
    return rows
