"""Everything a run's stages share: config, task, pool, budget, store, bus, clients, RNG.

One object per run, created by engine.run.runner; stages and the orchestrator receive it.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.costs.budget import Budget, Reservation
from engine.config import RunConfig
from engine.events import EventBus
from engine.llm.client import LLMClient
from engine.staleness import StalenessPolicy
from engine.pool import Pool
from engine.run.state import ChainState, KeepsState, MergeState, ProgramCounters, RunState, Tally, part_states
from engine.selection.pareto import MinibatchSampler, restore_rng, rng_state
from engine.selection.val_order import ValidationOrder
from engine.steering.state import SteeringState
from engine.store.store import Store
from engine.tasks.prompt_task import PromptTask

if TYPE_CHECKING:  # typing only: the ledger sits above the context (tests/test_layering.py)
    from engine.ledger import Ledger


EXIT_NO_PROGRESS = 4
"""Exit code of a run stopped because it made no progress (see BudgetConfig.max_stalled)."""
EXIT_IO = 5
"""Exit code of a run stopped because its database could not be written (disk full, I/O)."""


class FatalRunError(Exception):
    """Stops the whole run (bad endpoint, broken metric); the message is shown to the user."""

    def __init__(self, message: str, exit_code: int = 3) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def stop_if_fatal(exc: Exception) -> None:
    """An LLM error that no retry or other request can mend (engine/llm/errors.py: `fatal`, e.g. a
    rejected key or an unknown model) stops the whole run; any other is the caller's to handle."""
    if getattr(exc, "fatal", False):
        raise FatalRunError(str(exc)) from None


class CallFailed(Exception):
    """An LLM call an item needed failed (after its retries): the item fails with this reason.
    A missing answer is never scored as an empty one, which would quietly lower a score."""


class CallSink:
    """on_call target of the LLM clients, bound to the run's recorder once it exists."""

    def __init__(self) -> None:
        self.target = None

    def __call__(self, record) -> None:
        if self.target is None:
            raise RuntimeError("LLM call made before the run's recorder was bound")
        self.target(record)


@dataclass
class RunContext:
    run_id: str
    config: RunConfig
    task: PromptTask
    pool: Pool
    budget: Budget
    store: Store
    bus: EventBus
    task_llm: LLMClient
    reflection_llm: LLMClient
    policy: StalenessPolicy
    rng: random.Random
    sampler: MinibatchSampler
    backend: str
    call_sink: CallSink
    state: RunState = field(default_factory=RunState)
    """The mutable state a resume restores (engine/run/state.py); tally, merges, chain,
    gap_histogram, staleness_counts, item_seq and program below are views of it."""
    reservations: dict[str, Reservation] = field(default_factory=dict)
    val_order: ValidationOrder | None = None
    seed_id: str = ""
    started_mono: float = field(default_factory=time.monotonic)
    best_history: list[tuple[float, float]] = field(default_factory=list)
    """(elapsed wall seconds, best val mean) whenever the best improves."""
    local_server: object | None = None
    """engine.llm.local.LocalServer of local:// endpoints; stopped by EngineRun.close()."""
    ledger: Ledger | None = None
    """The only writer of the pool (engine/ledger.py); set by the task's stage handlers."""
    setup_warnings: list[str] = field(default_factory=list)
    """Found while setting the run up (an endpoint's preflight notices); front ends print them once."""
    steering: SteeringState = field(default_factory=SteeringState)
    """The operator's guidance, pins and bans (engine/steering/); a resume replays its rows."""
    state_parts: tuple[KeepsState, ...] = ()
    """The strategy's parts with state of their own, saved with the run state (EngineRun._construct)."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started_mono

    def next_item_id(self) -> str:
        self.item_seq += 1
        return f"i{self.item_seq:06d}"

    def capture_state(self) -> RunState:
        """The run state with the RNG, sampler, validation order and budget as they are now:
        what Recorder.save_run_state stores."""
        s = self.state
        s.rng = rng_state(self.rng)
        s.sampler = self.sampler.state()
        s.val_order = self.val_order.state() if self.val_order is not None else None
        if self.state_parts:
            s.strategy = part_states(self.state_parts)
        s.budget = self.budget.counters(self.elapsed())
        s.budget_limits = self.budget.limits_dict()
        return s

    def restore_state(self, state: RunState) -> None:
        """Adopt a stored state (resume): its counters, and its generators' positions when it has
        them. The budget is rebuilt by the caller, which reconciles it with the stored rows."""
        self.state = state
        if state.rng is not None:
            restore_rng(self.rng, state.rng)
        if state.sampler is not None:
            self.sampler.restore(state.sampler)
        if state.val_order is not None and self.val_order is not None:
            self.val_order.restore(state.val_order)

    # The names stages and the pipeline have always used, kept as views of self.state.
    @property
    def tally(self) -> Tally:
        return self.state.tally

    @tally.setter
    def tally(self, value: Tally) -> None:
        self.state.tally = value

    @property
    def merges(self) -> MergeState:
        return self.state.merges

    @merges.setter
    def merges(self, value: MergeState) -> None:
        self.state.merges = value

    @property
    def chain(self) -> ChainState:
        return self.state.chain

    @chain.setter
    def chain(self, value: ChainState) -> None:
        self.state.chain = value

    @property
    def gap_histogram(self) -> Counter:
        return self.state.gap_histogram

    @gap_histogram.setter
    def gap_histogram(self, value: Counter) -> None:
        self.state.gap_histogram = value

    @property
    def staleness_counts(self) -> Counter:
        return self.state.staleness_counts

    @staleness_counts.setter
    def staleness_counts(self, value: Counter) -> None:
        self.state.staleness_counts = value

    @property
    def item_seq(self) -> int:
        return self.state.item_seq

    @item_seq.setter
    def item_seq(self, value: int) -> None:
        self.state.item_seq = value

    @property
    def program(self) -> ProgramCounters:
        """Program-task counters (patch retries, tolerant blocks, filter counts)."""
        return self.state.program
