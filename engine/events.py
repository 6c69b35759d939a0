"""Typed engine events and a non-blocking bus.

Names follow GEPA's callback vocabulary. SQLite is the lossless record; bus subscribers have
bounded queues and drop their oldest events when they fall behind (the engine never waits).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: ClassVar[str] = "event"
    t: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return {"event": self.kind, **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    run_id: str
    task: str
    mode: str
    policy: str
    backend: str
    resumed: bool
    strategy: str = ""


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    run_id: str
    status: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class CandidateSelected(Event):
    kind: ClassVar[str] = "candidate_selected"
    item_id: str
    parent_id: str
    minibatch: list[str]
    pool_version: int


@dataclass(frozen=True, kw_only=True)
class ProposalStart(Event):
    kind: ClassVar[str] = "proposal_start"
    item_id: str
    parent_id: str


@dataclass(frozen=True, kw_only=True)
class ProposalEnd(Event):
    kind: ClassVar[str] = "proposal_end"
    item_id: str
    parent_id: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class EvaluationStart(Event):
    kind: ClassVar[str] = "evaluation_start"
    item_id: str
    split: str
    n_examples: int


@dataclass(frozen=True, kw_only=True)
class EvaluationEnd(Event):
    kind: ClassVar[str] = "evaluation_end"
    item_id: str
    split: str
    score: float


@dataclass(frozen=True, kw_only=True)
class CandidateAccepted(Event):
    kind: ClassVar[str] = "candidate_accepted"
    item_id: str
    artifact_id: str
    parent_id: str
    val_mean: float
    pool_version: int
    best: bool


@dataclass(frozen=True, kw_only=True)
class CandidateRejected(Event):
    kind: ClassVar[str] = "candidate_rejected"
    item_id: str
    parent_id: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ItemFailed(Event):
    kind: ClassVar[str] = "item_failed"
    item_id: str
    stage: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class StalenessDecision(Event):
    """Every check of an item's version gap, fresh or stale."""

    kind: ClassVar[str] = "staleness_decision"
    item_id: str
    stage: str
    policy: str
    gap: int
    item_version: int
    pool_version: int
    decision: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class StaleDetected(Event):
    kind: ClassVar[str] = "stale_detected"
    item_id: str
    stage: str
    gap: int
    decision: str


@dataclass(frozen=True, kw_only=True)
class StaleDiscarded(Event):
    kind: ClassVar[str] = "stale_discarded"
    item_id: str
    stage: str
    gap: int
    wasted_tokens: int


@dataclass(frozen=True, kw_only=True)
class QueueDepth(Event):
    kind: ClassVar[str] = "queue_depth"
    depths: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class WorkerReallocated(Event):
    kind: ClassVar[str] = "worker_reallocated"
    stage: str
    old: int
    new: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class BudgetUpdated(Event):
    kind: ClassVar[str] = "budget_updated"
    spent: dict[str, float]
    limits: dict[str, float | None]
    exhausted: str | None


@dataclass(frozen=True, kw_only=True)
class StateChanged(Event):
    kind: ClassVar[str] = "state_changed"
    state: str


@dataclass(frozen=True, kw_only=True)
class ReviewRequested(Event):
    kind: ClassVar[str] = "review_requested"
    item_id: str
    gate: str
    parent_id: str


@dataclass(frozen=True, kw_only=True)
class ReviewDecided(Event):
    kind: ClassVar[str] = "review_decided"
    item_id: str
    gate: str
    decision: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class PolicyChanged(Event):
    kind: ClassVar[str] = "policy_changed"
    policy: str
    max_gap: int


@dataclass(frozen=True, kw_only=True)
class LLMError(Event):
    kind: ClassVar[str] = "llm_error"
    stage: str
    error: str
    fatal: bool


@dataclass(frozen=True, kw_only=True)
class Notice(Event):
    """Something the user should know that is not tied to an item (lease, store, shutdown)."""

    kind: ClassVar[str] = "notice"
    level: str
    message: str


@dataclass(frozen=True, kw_only=True)
class BestRestored(Event):
    """An earlier validated artifact was made the run's active best again (engine/ledger.py)."""

    kind: ClassVar[str] = "best_restored"
    artifact_id: str
    previous_id: str | None
    val_mean: float
    pool_version: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class Steered(Event):
    """An operator steering act (engine/steering/acts.py): guidance, pin, ban, re-evaluation."""

    kind: ClassVar[str] = "steered"
    act_id: int
    act: str
    by: str
    target: str | None
    text: str | None
    count: int | None
    summary: str


@dataclass(frozen=True, kw_only=True)
class IslandsMigrated(Event):
    """Elites migrated between two islands (engine/ledger.py writes the migrations row too)."""

    kind: ClassVar[str] = "islands_migrated"
    from_island: int
    to_island: int
    artifact_ids: tuple[str, ...]
    pool_version: int
    trigger: str
    """"diversity" (delta of the islands' diversity over the threshold) or "interval"."""
    from_diversity: float
    to_diversity: float
    threshold: float | None


class Subscription:
    """A bounded mailbox; when full the oldest event is dropped and counted."""

    def __init__(self, maxlen: int) -> None:
        self._buf: deque[Event] = deque(maxlen=maxlen)
        self._ready = asyncio.Event()
        self.dropped = 0
        self.closed = False

    def _push(self, event: Event) -> None:
        if len(self._buf) == self._buf.maxlen:
            self.dropped += 1
        self._buf.append(event)
        self._ready.set()

    def drain(self) -> list[Event]:
        out = list(self._buf)
        self._buf.clear()
        self._ready.clear()
        return out

    async def wait(self) -> list[Event]:
        """Wait until at least one event (or close), then take everything buffered."""
        while not self._buf and not self.closed:
            await self._ready.wait()
            self._ready.clear()
        return self.drain()


class EventBus:
    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        self.published = 0

    def subscribe(self, maxlen: int = 10_000) -> Subscription:
        sub = Subscription(maxlen)
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def publish(self, event: Event) -> None:
        self.published += 1
        for sub in self._subs:
            sub._push(event)

    def close(self) -> None:
        for sub in self._subs:
            sub.closed = True
            sub._ready.set()
