"""The mutable state of a run that must survive a resume, and its one serializer.

RunContext holds one RunState (ctx.state) and keeps its old attribute names (ctx.tally,
ctx.merges, ctx.chain, ctx.gap_histogram, ctx.staleness_counts, ctx.item_seq) as views of it.
Recorder.save_run_state writes RunState.to_columns(); a resume reads RunState.from_columns();
attach builds its snapshot from the same stored state (engine/run/snapshot.py).

Stored form: two runs columns, kept key-compatible with the previous release so its runs still
resume and its readers still find what they read:
  rng_state_json  {"rng", "sampler", "val_order", "item_seq", "merges", "chain", "strategy"}
  counters_json   {"budget", "tally", "gap_histogram", "staleness_counts", "program", "budget_limits"}
The last four keys are new (issue 11); a state saved without them loads them empty. "strategy"
holds what a strategy's parts keep between picks (KeepsState below); absent = start them fresh.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

from engine.components import from_json as components_from_json
from engine.pool import Artifact, PoolChange


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
    calls_by_stage: Counter = field(default_factory=Counter)
    """LLM calls per stage (a strategy's agents included): what each part of the search costs."""
    tokens_by_stage: Counter = field(default_factory=Counter)
    """Prompt + completion tokens per stage."""

    def to_dict(self) -> dict:
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Tally":
        tally = cls()
        for key, value in data.items():
            current = getattr(tally, key, None)
            if isinstance(current, Counter):
                setattr(tally, key, Counter(value))
            elif key in tally.__dataclass_fields__:
                setattr(tally, key, value)
        return tally


@dataclass
class MergeState:
    """Merges owed (one per accepted proposal), merges started, and pairs already tried."""

    due: int = 0
    done: int = 0
    tried: set[tuple[str, str]] = field(default_factory=set)

    def count_accepted(self, is_merge: bool, tally: Tally) -> None:
        """GEPA owes a merge attempt for every new proposal in the pool; merges owe none."""
        if is_merge:
            tally.merges_accepted += 1
        else:
            self.due += 1

    def to_dict(self) -> dict:
        return {"due": self.due, "done": self.done, "tried": sorted(list(p) for p in self.tried)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MergeState":
        return cls(int(d.get("due", 0)), int(d.get("done", 0)), {(a, b) for a, b in d.get("tried", [])})


@dataclass
class ChainState:
    """mode chain: the newest head that chains build on (engine/capabilities/gated_chain.py)."""

    head_text: str = ""
    head_base: str = ""
    """The newest pool artifact the head is or descends from (lineage and version gaps)."""
    head_chain: list[str] = field(default_factory=list)
    """Items whose unvalidated candidates led to the head, newest first (empty when the head is
    head_base itself); validation picks the nearest of them that made it into the pool."""
    seq: int = 0
    """Bumped at every new head, so a chain can tell that another one moved it."""
    count: int = 0
    """Chains allowed at once now (0 until the run's first admission sets it to the floor)."""
    clean_steps: int = 0
    """Gated steps in a row whose candidate did not collide with another chain's head."""

    MAX_CHAIN = 50

    def bounded(self, floor: int, top: int) -> int:
        """The count within [floor, top]; an unset count (0) is the floor."""
        return min(max(self.count or floor, floor), top)

    def after_step(self, collided: bool, floor: int, top: int, grow_after: int) -> None:
        """Adapt the chain count to how often chains collide (a candidate that cannot join the
        newer head: another chain made its edit, or a conflicting one). A collision takes one
        chain away, down to `floor`; `grow_after` steps in a row without one add a chain, up to
        `top`. Early in a run, when every chain sees the same few failures, chains collide often
        and fewer run; once the obvious edits are in, more run (engine/config/__init__.py, chains_min)."""
        count = self.bounded(floor, top)
        if collided:
            self.count, self.clean_steps = max(floor, count - 1), 0
            return
        self.clean_steps += 1
        if self.clean_steps >= grow_after:
            count, self.clean_steps = min(top, count + 1), 0
        self.count = count

    def to_dict(self) -> dict:
        return {"head_text": self.head_text, "head_base": self.head_base, "head_chain": list(self.head_chain),
                "seq": self.seq, "count": self.count, "clean_steps": self.clean_steps}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ChainState":
        return cls(str(d.get("head_text", "")), str(d.get("head_base", "")), [str(i) for i in d.get("head_chain", [])],
                   int(d.get("seq", 0)), int(d.get("count", 0)), int(d.get("clean_steps", 0)))


@dataclass
class ProgramCounters:
    """Program tasks (engine/stages/program_stages.py) count here, not on the stage handler, so
    a resumed run's summary keeps what the earlier sessions counted."""

    patch_retries: int = 0
    """LLM replies whose patch did not apply and were asked again."""
    tolerant_blocks: int = 0
    """SEARCH blocks that matched only with whitespace-tolerant matching."""
    filter_counts: Counter = field(default_factory=Counter)
    """Children each cheap filter turned away, by kind (engine/code/filters.py KINDS); the
    ProgramFilters of the run count into this Counter."""
    failures: Iterable[str] = field(default_factory=list)
    """The recent failed attempts the proposer is shown (the stage handler bounds them): kept
    here so a resumed run's next proposal request is the one the uninterrupted run sent."""
    tried: dict[str, list[list[str]]] = field(default_factory=dict)
    """Parent id -> [diff, outcome] of the changes tried on it (engine/stages/program_tried.py),
    in the run state for the same reason."""

    def to_dict(self) -> dict:
        return {"patch_retries": self.patch_retries, "tolerant_blocks": self.tolerant_blocks,
                "filters": dict(self.filter_counts), "failures": list(self.failures),
                "tried": {k: [list(e) for e in v] for k, v in self.tried.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ProgramCounters":
        return cls(int(d.get("patch_retries", 0)), int(d.get("tolerant_blocks", 0)),
                   Counter({str(k): int(v) for k, v in (d.get("filters") or {}).items()}),
                   [str(f) for f in d.get("failures") or ()],
                   {str(k): [[str(x) for x in e] for e in v] for k, v in (d.get("tried") or {}).items()})


_GENERATOR_KEYS = ("rng", "sampler", "val_order", "item_seq", "merges", "chain", "strategy")
"""Keys stored in runs.rng_state_json; the rest of to_dict() goes to runs.counters_json."""


@dataclass
class RunState:
    """Everything mutable about a run that a resume must get back."""

    tally: Tally = field(default_factory=Tally)
    merges: MergeState = field(default_factory=MergeState)
    chain: ChainState = field(default_factory=ChainState)
    gap_histogram: Counter = field(default_factory=Counter)
    """Version gap -> items checked for staleness with that gap."""
    staleness_counts: Counter = field(default_factory=Counter)
    """Staleness decision (pass / discard / reflect, reflect_<verdict>, chain_rebase) -> count."""
    item_seq: int = 0
    program: ProgramCounters = field(default_factory=ProgramCounters)
    # Captured from live objects by RunContext.capture_state() right before a save (between
    # saves they lag); restored into those objects by RunContext.restore_state().
    budget: dict[str, float] = field(default_factory=dict)
    """Budget spent per key, and wall_s, as of the last capture."""
    budget_limits: dict[str, float | None] = field(default_factory=dict)
    """The limits in force (a resume may raise them over the stored config); {} = not saved."""
    rng: list | None = None
    """engine.selection.pareto.rng_state of the run's RNG; None = never saved (start fresh)."""
    sampler: dict | None = None
    val_order: dict | None = None
    strategy: dict | None = None
    """The strategy parts' own state by state_key (part_states); None = never saved."""

    def to_dict(self) -> dict:
        """JSON-ready; gap keys become strings (JSON object keys), from_dict turns them back."""
        out: dict[str, Any] = {
            "tally": self.tally.to_dict(),
            "merges": self.merges.to_dict(),
            "chain": self.chain.to_dict(),
            "gap_histogram": {str(gap): n for gap, n in sorted(self.gap_histogram.items())},
            "staleness_counts": dict(self.staleness_counts),
            "item_seq": self.item_seq,
            "program": self.program.to_dict(),
            "budget": dict(self.budget),
            "budget_limits": dict(self.budget_limits),
        }
        # Absent rather than null, as the previous release wrote them.
        for key in ("rng", "sampler", "val_order", "strategy"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunState":
        """Any subset of the keys loads (a previous release's state lacks the newer ones)."""
        return cls(
            tally=Tally.from_dict(d.get("tally") or {}),
            merges=MergeState.from_dict(d.get("merges") or {}),
            chain=ChainState.from_dict(d.get("chain") or {}),
            gap_histogram=Counter({int(k): int(v) for k, v in (d.get("gap_histogram") or {}).items()}),
            staleness_counts=Counter({str(k): int(v) for k, v in (d.get("staleness_counts") or {}).items()}),
            item_seq=int(d.get("item_seq", 0)),
            program=ProgramCounters.from_dict(d.get("program") or {}),
            budget={str(k): float(v) for k, v in (d.get("budget") or {}).items()},
            budget_limits={str(k): None if v is None else float(v) for k, v in (d.get("budget_limits") or {}).items()},
            rng=d.get("rng"),
            sampler=d.get("sampler"),
            val_order=d.get("val_order"),
            strategy=d.get("strategy"),
        )

    def to_columns(self) -> dict[str, dict]:
        """The runs columns the state is stored in (Store.update_run keyword arguments)."""
        d = self.to_dict()
        generators = {k: v for k, v in d.items() if k in _GENERATOR_KEYS}
        return {"rng_state_json": generators, "counters_json": {k: v for k, v in d.items() if k not in generators}}

    @classmethod
    def from_columns(cls, rng_state: Mapping[str, Any] | None, counters: Mapping[str, Any] | None) -> "RunState":
        """From a decoded runs row's rng_state and counters (either may be NULL)."""
        return cls.from_dict({**(counters or {}), **(rng_state or {})})


@runtime_checkable
class KeepsState(Protocol):
    """A strategy part with state of its own between picks (a round-robin turn): saved with the
    run state under state_key, so a resumed run continues where the killed one was."""

    state_key: str

    def state(self) -> dict: ...

    def restore(self, state: Mapping[str, Any]) -> None: ...


def stateful_parts(parts: Iterable[object]) -> tuple[KeepsState, ...]:
    return tuple(p for p in parts if isinstance(p, KeepsState))


def strategy_parts(strategy) -> tuple[KeepsState, ...]:
    """The parts of an engine.strategy Strategy that keep state (duck-typed: no strategy import here)."""
    return stateful_parts((strategy.selector, strategy.context, strategy.acceptance, *strategy.stages))


def part_states(parts: Iterable[KeepsState]) -> dict[str, dict]:
    return {p.state_key: p.state() for p in parts}


def restore_part_states(parts: Iterable[KeepsState], stored: Mapping[str, Any] | None) -> None:
    for part in parts:
        if stored and part.state_key in stored:
            part.restore(stored[part.state_key])


def artifact_from_row(row: Mapping[str, Any]) -> Artifact:
    """A pool artifact from its decoded artifacts row (resume and the stored snapshot alike);
    components_json (NULL for one-component artifacts) comes back exactly as stored."""
    return Artifact(
        artifact_id=row["artifact_id"],
        text=row["text"],
        parent_ids=tuple(row["parent_ids"] or ()),
        created_version=row["created_version"],
        val_scores=row["val_scores"] or {},
        status=row["status"],
        created_at=row["created_at"],
        meta=row["meta"] or {},
        components=components_from_json(row.get("components")),
    )


def change_from_row(row: Mapping[str, Any]) -> PoolChange:
    """A pool change from its decoded pool_events row."""
    return PoolChange(row["version"], row["kind"], row["artifact_id"], row["detail"] or {})
