"""Speculation for program tasks (FlashEvolve §3.3 with a cascade evaluator's stages as the prefix).

Why: a cascade evaluator (OpenEvolve's evaluate_stage1, 2, 3) often spends most of its time in its
later stages (more instances, longer runs, a held-back check). A candidate whose early stage
already scores above the pool's best is probably the next best program; waiting for the rest of
its cascade before anyone builds on it idles the proposers for that long. So:

- when a cascade stage passes with stages still to run and its score is above the pool's best,
  the candidate enters the pool as speculative (engine/capabilities/speculation.py): selectable as a
  parent, never the best; in mode chain it also becomes the shared head at once and its step hands
  its chain on (the step no longer holds a proposal slot), so the chain's next step starts from it
  while the cascade finishes;
- when the cascade ends and the strategy accepts the candidate (update), the speculative program is
  confirmed with its full score (below the best it is an ordinary pool member; a chain head that
  ended below the best steps back to the best);
- when its item ends any other way (a later stage failed its threshold below the gate, the
  evaluation failed, a review rejected it) the speculative program is removed and work started
  from it falls back to its parent (Speculation), a chain rebasing its edit onto the head.

The stage score must estimate the final score for this to pay: it is the evaluator's stage
combined_score, compared with the pool best's full score. Needs an evaluator service that reports
stages as they end (the local sandbox; Ray tasks return whole).
"""

from __future__ import annotations

from typing import Callable

from engine.capabilities.speculation import Speculation
from engine.code import cycling
from engine.items import WorkItem
from engine.pipeline.modes import mode_named, speculation_refusal

SCORE_KEY = "combined_score"


def speculation_refusal_for(config, task) -> str:
    """Why speculation cannot run with this run's mode on this task ("" when it can): the mode's
    kinds (engine/pipeline/modes.py), then a program task's cascade and evaluator."""
    why = speculation_refusal(mode_named(config.pipeline.mode), task.kind)
    if why or task.kind != "program":
        return why
    if not task.settings.cascade:
        return ("speculation on a program task inserts a candidate after an early cascade stage; this task's "
                "evaluator runs no cascade (set [program] cascade = true with evaluate_stage1 ... in evaluator.py, "
                "or remove [pipeline] speculation)")
    if config.evaluator.backend != "local":
        return (f"speculation on a program task needs each cascade stage's score as it ends; [evaluator] backend "
                f"{config.evaluator.backend!r} returns an evaluation whole (use backend \"local\" or remove "
                "[pipeline] speculation)")
    return ""


class ProgramSpeculation:
    """Bound to ProgramStages (the host of Speculation: ctx, ledger, recorder, artifact_meta) and to
    its chain (None outside mode chain)."""

    def __init__(self, host, chain) -> None:
        self.host = host
        self.chain = chain
        self.speculation = Speculation(host)

    def on_stage(self, item: WorkItem) -> Callable[[dict], None] | None:
        """The sandbox's stage callback for this item's evaluation; None when speculation is off."""
        ctx = self.host.ctx
        if not ctx.config.pipeline.speculation or item.is_merge:
            return None
        return lambda stage: self.stage_passed(item, stage)

    def stage_passed(self, item: WorkItem, stage: dict) -> None:
        ctx = self.host.ctx
        if item.speculative is not None or item.outcome is not None or stage["index"] >= stage["of"] - 1:
            return
        score = stage["score"]
        recycled = item.evaluation.recycled_lines if item.evaluation is not None else None
        if self.host.guard == "penalise" and recycled:
            score = cycling.penalised(score, recycled["share"], self.host.settings.cycling_penalty)
        best = ctx.pool.best()
        if best is None or score <= best.val_mean:
            return
        self.speculation.insert(item, item.proposal.child, [{"example_id": SCORE_KEY, "score": score}], score,
                                best.val_mean)
        if self.chain is not None:
            self.chain.speculative_head(item, item.speculative.artifact_id)
            self.host.wake()  # the step may have handed its chain on: admission starts the next one
        # A resume must know the artifact is its own (it confirms or removes it, never inserts twice).
        self.host.recorder.save_item(item, outcome=None)

    def settle(self, item: WorkItem, score: float, meta: dict) -> None:
        """The strategy accepted the evaluated candidate: its speculative artifact is confirmed with
        the full score and meta (counted and announced by the ledger, as a commit is)."""
        spec = item.speculative
        self.host.ledger.confirm(item, spec.artifact_id, {SCORE_KEY: score}, score, spec.threshold, meta=meta)

    def abandon(self, item: WorkItem) -> None:
        """The item ended without a commit: its speculative artifact leaves the pool (a chain head
        that was it steps back)."""
        spec = item.speculative
        if spec is None:
            return
        self.speculation.abandon(item)
        if self.chain is not None:
            self.chain.head_removed(spec.artifact_id)
