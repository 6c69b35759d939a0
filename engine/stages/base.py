"""What both task kinds share as search handlers (engine/pipeline/spec.py: SearchHandlers).

A kind (prompt_stages.py, program_stages.py) knows how to run, score and patch its artifacts;
the strategy it is given (engine/strategy/) decides parents, context, acceptance and merges.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.context import RunContext
from engine.items import WorkItem, current_item
from engine.ledger import EvalRows, Ledger
from engine.pipeline.modes import mode_named
from engine.pipeline.spec import Spawn, StageSpec
from engine.pool import Artifact
from engine.selection import merge
from engine.selection.pareto import item_rng
from engine.steering import live as steering
from engine.stages.strategy_stages import (KindEnv, ended, fresh_notes, guidance_keys, stage_specs, strategy_calls,
                                           with_guidance)
from engine.strategy.protocols import Evidence, Pick, Strategy


class KindHandlers:
    kind = ""
    chain_workers: dict[str, int] = {}
    """mode chain: stage -> workers the kind sets itself (SearchHandlers.chain_workers)."""

    def __init__(self, ctx: RunContext, strategy: Strategy, rows: EvalRows) -> None:
        self.ctx = ctx
        self.strategy = strategy
        self.mode = mode_named(ctx.config.pipeline.mode)
        self.ledger = ctx.ledger = Ledger(ctx, rows)
        self.recorder = None
        """The run's recorder (engine/pipeline/recorder.py), bound by the orchestrator."""
        self.spawn: Spawn | None = None
        self.wake: Callable[[], None] = lambda: None
        """Admission looks again (bound by the orchestrator)."""
        self.strategy_env = KindEnv(ctx, strategy)
        """What the strategy's stages are given (engine/stages/strategy_stages.py)."""

    def bind(self, recorder, spawn: Spawn, wake: Callable[[], None] | None = None) -> None:
        self.recorder = recorder
        self.spawn = spawn
        self.wake = wake or (lambda: None)

    # -- what the strategy decides ----------------------------------------------------------
    @property
    def instances(self) -> Sequence[str]:
        """The ids the kind scores per instance (what Pareto selection compares on)."""
        raise NotImplementedError

    def pick_parent(self) -> Pick:
        # The operator's pin and bans (engine/steering/) apply to every strategy's pick here.
        return steering.steered_pick(self.ctx, lambda: self.strategy.selector.pick(self.ctx.pool, self.instances,
                                                                                   self.ctx.rng))

    @staticmethod
    def artifact_meta(item: WorkItem) -> dict:
        """Meta every committed child carries: its item, the version it was made from, a merge's
        ancestor and the selector's tags."""
        meta = {"item_id": item.item_id, "from_version": item.created_version, **merge.merge_meta(item)}
        if item.tags:
            meta["selection"] = dict(item.tags)
        if item.notes:
            meta["notes"] = dict(item.notes)
        return meta

    # -- the strategy's own stages ------------------------------------------------------------
    def strategy_stages(self, when: str) -> list[StageSpec]:
        return stage_specs(self.strategy.stages, when, self.strategy_env, self.child_score)

    @property
    def strategy_calls(self) -> int:
        return strategy_calls(self.strategy.stages)

    async def with_guidance(self, messages: list[dict], item: WorkItem) -> list[dict]:
        """The proposal request and the strategy stages' guidance for this item, stale notes
        first put through the staleness policy."""
        await fresh_notes(self.strategy.stages, item, self.strategy_env, self.recorder, self.child_score)
        messages = with_guidance(messages, item, guidance_keys(self.strategy.stages))
        return steering.with_operator_guidance(self.ctx, messages, item)  # "## Guidance from the operator"

    def child_score(self, item: WorkItem) -> float | None:
        """An evaluated candidate's score, for the strategy's stages after evaluation."""
        raise NotImplementedError

    def inspirations(self, parent: Artifact) -> list[Artifact]:
        # The item's own generator: a resume that skips a finished propose must not leave the
        # run's generator one draw behind the uninterrupted run (engine/selection/pareto.item_rng).
        rng = item_rng(self.ctx.config.seed, current_item.get(), "inspirations")
        return self.strategy.context.inspirations(self.ctx.pool, parent, rng)

    def merge_weights(self) -> dict[str, int]:
        return dict(self.strategy.selector.merge_weights(self.ctx.pool, self.instances))

    def gate(self, child: Evidence, parent: Evidence, item: WorkItem) -> str | None:
        """None if the candidate passes the strategy's gate, else the reason."""
        return self.strategy.acceptance.verdict(child, parent, tie_passes=item.is_merge)

    @staticmethod
    def rollout_side(item: WorkItem) -> Evidence:
        """The parent's side of a minibatch gate: its rollout traces (outputs and feedback too)."""
        if item.rollout.traces is not None:
            return Evidence.of_traces(item.rollout.traces)
        return Evidence.of_scores(item.minibatch, item.rollout.parent_mb)

    # -- defaults of the SearchHandlers protocol ----------------------------------------------
    def admitted(self, item: WorkItem) -> None:
        return None

    def abandoned(self, item: WorkItem) -> None:
        return None

    def ended(self, item: WorkItem) -> None:
        ended(self.strategy, item)

    async def validation_traces(self, parts) -> list[dict]:
        """A hot-swapped edit (engine/components/hot_swap.py) on the whole validation set; the kinds of named
        components (prompt, adapter) implement it. A program is one text: nothing to edit by name."""
        from engine.components.hot_swap import HotSwapError  # hot_swap is not a stage module: imported on use

        raise HotSwapError(f"a {self.kind} task run cannot validate an edited component; hot-swap needs a "
                           "prompt task or an evotui.optimize (adapter) run")

    def figures(self) -> dict:
        return {}

    async def aclose(self) -> None:
        """Release the kind's services at the run's end (a program task's evaluator); none here."""
