"""Stage hooks: staleness decisions, persistence of every attempt, events, budget release.

This is where an item's version gap is computed (at consumption) and where each decision and
stage transition becomes a row in SQLite (the lossless record) and an event (observers may drop).
"""

from __future__ import annotations

import time
import traceback
from typing import Callable

from engine import events as ev
from engine.context import CallFailed, FatalRunError, RunContext
from engine.items import WorkItem, current_item
from engine.pipeline.stage import Stage
from engine.staleness import Decision

MAX_CONSECUTIVE_LLM_ERRORS = 25
MAX_CONSECUTIVE_CRASHES = 20
"""Internal errors (a handler bug) in a row, with no item finishing normally between them, after
which the run stops: a bug that hits every item would otherwise make items without end, each
paying for its rollout, since a crashed item is charged no proposal."""
"""Calls failing in a row (each after its retries) that stop the run instead of burning budget."""
"""Stages that check staleness before spending LLM calls on an item."""


class Recorder:
    def __init__(self, ctx: RunContext, checked: tuple[str, ...], reflect_to: str, on_item_end: Callable[[WorkItem], None],
                 on_fatal: Callable[[FatalRunError], None]) -> None:
        self.ctx = ctx
        self.checked = checked
        """Stages that check staleness before spending LLM calls on an item."""
        self.reflect_to = reflect_to
        """The stage stale items rejoin after reflection: there they carry a proposal to repair."""
        self.on_item_end = on_item_end
        self.on_fatal = on_fatal
        self.in_flight: dict[str, WorkItem] = {}
        self.consecutive_errors = 0
        self.consecutive_crashes = 0
        self.abandon: Callable[[WorkItem], None] | None = None
        """Set by the orchestrator: the handlers release what an item that ended without being
        accepted holds in the archive (a speculative artifact)."""
        self.reroute: Callable[[WorkItem, str], None] | None = None
        """Set by the orchestrator: sends an item to another stage (stale -> reflect)."""

    # -- item lifecycle -------------------------------------------------------------------
    def item_created(self, item: WorkItem) -> None:
        self.in_flight[item.item_id] = item
        self.save_item(item, outcome=None)
        self.save_run_state()

    def item_started(self, stage: Stage, item: WorkItem) -> str | None:
        ctx = self.ctx
        current_item.set(item.item_id)
        gap = ctx.pool.gap(item.created_version)
        item.gaps[stage.name] = gap
        item.started_at = time.time()
        if stage.name not in self.checked:
            return None
        ctx.gap_histogram[gap] += 1
        reflected = item.reflected_at
        if reflected is not None and stage.name == self.reflect_to:
            # Already checked against the pool by the reflect stage: do not loop back.
            decision = Decision("pass", f"reflected at v{reflected}")
        elif item.is_merge:
            # Built from two validated pool artifacts, not from an outdated proposal.
            decision = Decision("pass", "merge of pool artifacts")
        else:
            decision = ctx.policy.decide(gap, reflectable=stage.name == self.reflect_to)
        ctx.staleness_counts[decision.action] += 1
        wasted = item.tokens if decision.action == "discard" else 0
        self.record_decision(item, stage.name, gap, decision.action, decision.reason, tokens=wasted)
        if gap > 0:
            ctx.bus.publish(ev.StaleDetected(item_id=item.item_id, stage=stage.name, gap=gap, decision=decision.action))
        if decision.action == "discard":
            self.discard(item, stage.name, gap, decision.reason, "discarded_stale")
            return "discarded_stale"
        if decision.action == "reflect":
            return "to_reflect"
        return None

    def record_decision(self, item: WorkItem, stage: str, gap: int, action: str, reason: str,
                        tokens: int = 0, detail: dict | None = None) -> None:
        """A staleness decision as a row and an event (every decision, fresh or stale)."""
        ctx = self.ctx
        ctx.store.insert_staleness(
            ctx.run_id,
            item_id=item.item_id,
            stage=stage,
            policy=ctx.policy.name,
            gap=gap,
            item_version=item.created_version,
            pool_version=ctx.pool.version,
            decision=action,
            reason=reason,
            created_at=time.time(),
            tokens=tokens,
            detail=detail,
        )
        ctx.bus.publish(
            ev.StalenessDecision(
                item_id=item.item_id, stage=stage, policy=ctx.policy.name, gap=gap,
                item_version=item.created_version, pool_version=ctx.pool.version,
                decision=action, reason=reason,
            )
        )

    def discard(self, item: WorkItem, stage: str, gap: int, reason: str, outcome: str) -> None:
        """Count a discarded item's tokens as wasted and mark its outcome."""
        ctx = self.ctx
        ctx.tally.discarded_stale += 1
        ctx.tally.wasted_tokens += item.tokens
        ctx.bus.publish(ev.StaleDiscarded(item_id=item.item_id, stage=stage, gap=gap, wasted_tokens=item.tokens))
        item.outcome = outcome
        item.reason = reason

    def item_finished(self, stage: Stage, item: WorkItem, started_at: float, outcome: str) -> None:
        ctx = self.ctx
        if outcome not in ("error", "forwarded", "parked"):  # an item that ended, and not by a bug
            self.consecutive_crashes = 0
        now = time.time()
        ctx.store.insert_item_stage(
            ctx.run_id,
            item_id=item.item_id,
            stage=stage.name,
            version_at_consume=ctx.pool.version,
            gap=item.gaps.get(stage.name, 0),
            enqueued_at=item.enqueued_at,
            started_at=started_at,
            finished_at=now,
            outcome=outcome,
        )
        if outcome == "forwarded" and stage.downstream is not None:
            item.stage = stage.downstream.name
            self.save_item(item, outcome=None)
            return
        if outcome == "to_reflect" and self.reroute is not None:
            item.stage = "reflect"
            self.save_item(item, outcome=None)
            self.reroute(item, "reflect")
            return
        if outcome == "parked":
            # Waiting for review in front of this stage: still open, re-parked on resume.
            self.save_item(item, outcome=None)
            return
        final = item.outcome if item.outcome is not None else outcome
        if final != "accepted" and self.abandon is not None:
            self.abandon(item)
        self.save_item(item, outcome=final)
        self.in_flight.pop(item.item_id, None)
        ctx.budget.release(ctx.reservations.pop(item.item_id, None))
        self.save_run_state()
        self.on_item_end(item)

    def item_finished_at_gate(self, stage: Stage, item: WorkItem, outcome: str) -> None:
        """End an item a review gate rejected (it is not inside any stage's worker)."""
        self.item_finished(stage, item, item.parked_at if item.parked_at is not None else time.time(), outcome)

    def handler_crashed(self, stage: Stage, item: WorkItem, exc: BaseException) -> None:
        if isinstance(exc, FatalRunError):
            # Leave the item open: a resumed run redoes it once the cause is fixed.
            self.on_fatal(exc)
            return
        ctx = self.ctx
        ctx.tally.failed += 1
        if isinstance(exc, CallFailed):
            # A failed call is a failed attempt, recorded as such (never scored as an empty answer).
            detail, outcome = str(exc), "failed"
            ctx.tally.fail_reasons[f"LLM error in {stage.name}"] += 1
        else:
            detail, outcome = "".join(traceback.format_exception_only(type(exc), exc)).strip(), "error"
            ctx.tally.fail_reasons[f"internal error in {stage.name}"] += 1
            self.consecutive_crashes += 1
            if self.consecutive_crashes >= MAX_CONSECUTIVE_CRASHES:
                self.on_fatal(FatalRunError(
                    f"{self.consecutive_crashes} items in a row ended with an internal error (last, in stage "
                    f"{stage.name}: {detail}); this is a bug, not your input: report it with `evotui export`; "
                    "the run stopped so it spends nothing more on it"))
        item.outcome = outcome
        item.reason = f"{stage.name}: {detail}"
        ctx.bus.publish(ev.ItemFailed(item_id=item.item_id, stage=stage.name, reason=detail))
        self.item_finished(stage, item, item.started_at if item.started_at is not None else time.time(), outcome)

    def charge_proposal(self, item: WorkItem, made: bool) -> None:
        """A proposal is charged once, when its LLM work is over, together with a row that says
        so: on resume the budget is counted from these rows, so a proposal lost to a kill is
        redone and paid once, and one that was saved is never paid again."""
        ctx = self.ctx
        ctx.tally.proposal_attempts += 1
        ctx.budget.charge("proposals", 1, ctx.reservations.get(item.item_id))
        item.charged = "made" if made else "failed"
        self.save_item(item, outcome=None)

    @staticmethod
    def proposal_done(item: WorkItem) -> bool:
        """A re-enqueued item whose proposal was charged before the interruption."""
        return item.charged is not None

    # -- rows -----------------------------------------------------------------------------
    def save_item(self, item: WorkItem, outcome: str | None) -> None:
        payload = {k: v for k, v in item.to_payload().items() if k not in ("outcome", "started_at", "parked_at")}
        now = time.time()
        self.ctx.store.upsert_item(
            self.ctx.run_id,
            item_id=item.item_id,
            created_version=item.created_version,
            parent_artifact_id=item.parent_id,
            stage=item.stage,
            payload=payload,
            outcome=outcome,
            error=item.reason if outcome else None,
            created_at=item.created_at,
            updated_at=now,
        )

    def save_run_state(self) -> None:
        """The run's RunState (engine/run/state.py, its one serializer) into its runs row."""
        ctx = self.ctx
        ctx.store.update_run(
            ctx.run_id,
            **ctx.capture_state().to_columns(),
            pool_version=ctx.pool.version,
            updated_at=time.time(),
        )

    # -- LLM calls ------------------------------------------------------------------------
    def llm_call(self, rec) -> None:
        """on_call hook of both LLM clients: one row per call, charged to the calling item."""
        ctx = self.ctx
        item_id = current_item.get()
        tokens = rec.prompt_tokens + rec.completion_tokens
        ctx.tally.llm_calls += 1
        ctx.tally.llm_retries += rec.retries
        ctx.tally.prompt_tokens += rec.prompt_tokens
        ctx.tally.completion_tokens += rec.completion_tokens
        ctx.tally.calls_by_stage[rec.stage] += 1
        ctx.tally.tokens_by_stage[rec.stage] += tokens
        if rec.status == "error":
            ctx.tally.llm_errors += 1
            self.consecutive_errors += 1
            ctx.bus.publish(ev.LLMError(stage=rec.stage, error=rec.error or "error", fatal=False))
            if self.consecutive_errors >= MAX_CONSECUTIVE_LLM_ERRORS:
                self.on_fatal(FatalRunError(
                    f"{self.consecutive_errors} LLM calls in a row failed (last: {rec.error}); "
                    f"check the endpoint {rec.url}, then `evotui resume`"
                ))
        elif rec.status != "cancelled":
            self.consecutive_errors = 0
        reservation = ctx.reservations.get(item_id or "")
        ctx.budget.charge("llm_calls", 1, reservation)
        ctx.budget.charge("tokens", tokens, reservation)
        ctx.budget.charge_call(rec, reservation)  # dollars and GPU-seconds at the price table's prices
        item = self.in_flight.get(item_id or "")
        if item is not None:
            item.tokens += tokens
        ctx.store.insert_llm_call(ctx.run_id, rec, item_id)
