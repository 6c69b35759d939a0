"""Everything a run's stages share: config, task, pool, budget, store, bus, clients, RNG.

One object per run, created by engine.runner; stages and the orchestrator receive it.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.budget import Budget, Reservation
from engine.config import RunConfig
from engine.events import EventBus
from engine.llm.client import LLMClient
from engine.pipeline.staleness import StalenessPolicy
from engine.pool import Pool
from engine.selection.pareto import MinibatchSampler
from engine.selection.val_order import ValidationOrder
from engine.store.store import Store
from engine.tasks.prompt_task import PromptTask

if TYPE_CHECKING:
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
class Tally:
    """Outcome counters of this run (restored on resume from the store)."""

    proposals: int = 0
    """Proposals the LLM returned in usable form."""
    proposal_attempts: int = 0
    accepted: int = 0
    rejected: int = 0
    failed: int = 0
    discarded_stale: int = 0
    skipped: int = 0
    merges_tried: int = 0
    merges_accepted: int = 0
    superseded: int = 0
    """mode chain: gate-passing heads left unvalidated because a newer head carries their edit."""
    speculative_inserted: int = 0
    speculative_confirmed: int = 0
    speculative_removed: int = 0
    wasted_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    llm_errors: int = 0
    llm_retries: int = 0
    metric_calls: int = 0
    fail_reasons: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "fail_reasons"}
        out["fail_reasons"] = dict(self.fail_reasons)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Tally":
        tally = cls()
        for key, value in data.items():
            if key == "fail_reasons":
                tally.fail_reasons = Counter(value)
            elif hasattr(tally, key):
                setattr(tally, key, value)
        return tally


@dataclass
class MergeState:
    """Merges owed (one per accepted proposal), merges started, and pairs already tried."""

    due: int = 0
    done: int = 0
    tried: set[tuple[str, str]] = field(default_factory=set)

    def count_accepted(self, is_merge: bool, tally: "Tally") -> None:
        """GEPA owes a merge attempt for every new proposal in the pool; merges owe none."""
        if is_merge:
            tally.merges_accepted += 1
        else:
            self.due += 1

    def to_dict(self) -> dict:
        return {"due": self.due, "done": self.done, "tried": sorted(list(p) for p in self.tried)}

    @classmethod
    def from_dict(cls, d: dict) -> "MergeState":
        return cls(int(d.get("due", 0)), int(d.get("done", 0)), {(a, b) for a, b in d.get("tried", [])})


@dataclass
class ChainState:
    """mode chain: the newest head that chains build on (engine/stages/chain.py)."""

    head_text: str = ""
    head_base: str = ""
    """The newest pool artifact the head is or descends from (lineage and version gaps)."""
    head_chain: list[str] = field(default_factory=list)
    """Items whose unvalidated candidates led to the head, newest first (empty when the head is
    head_base itself); validation picks the nearest of them that made it into the pool."""
    seq: int = 0
    """Bumped at every new head, so a chain can tell that another one moved it."""

    MAX_CHAIN = 50

    def to_dict(self) -> dict:
        return {"head_text": self.head_text, "head_base": self.head_base, "head_chain": list(self.head_chain),
                "seq": self.seq}

    @classmethod
    def from_dict(cls, d: dict) -> "ChainState":
        return cls(str(d.get("head_text", "")), str(d.get("head_base", "")), [str(i) for i in d.get("head_chain", [])],
                   int(d.get("seq", 0)))


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
    tally: Tally = field(default_factory=Tally)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    gap_histogram: Counter = field(default_factory=Counter)
    staleness_counts: Counter = field(default_factory=Counter)
    val_order: ValidationOrder | None = None
    merges: MergeState = field(default_factory=MergeState)
    chain: ChainState = field(default_factory=ChainState)
    seed_id: str = ""
    item_seq: int = 0
    started_mono: float = field(default_factory=time.monotonic)
    best_history: list[tuple[float, float]] = field(default_factory=list)
    """(elapsed wall seconds, best val mean) whenever the best improves."""
    local_server: object | None = None
    """engine.llm.local.LocalServer of local:// endpoints; stopped by EngineRun.close()."""
    ledger: Ledger | None = None
    """The only writer of the pool (engine/ledger.py); set by the task's stage handlers."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started_mono

    def next_item_id(self) -> str:
        self.item_seq += 1
        return f"i{self.item_seq:06d}"
