"""The strategy seam: the parts a search strategy is composed of, as protocols.

A task kind (engine/stages/: prompt or program) knows how to run, score and patch its
artifacts; a strategy decides the search: which parent to improve, what else the proposer
sees, which operators run, what is admitted to the archive. The kinds call these parts and
nothing else of a strategy, so any strategy runs on any kind.

Adding a strategy: one module that composes parts (new ones or those in parts.py) into a
`Strategy` and registers it (registry.py); `engine/strategy/builtin.py` imports it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Hashable, Iterable, Literal, Mapping, Protocol, Sequence, TypeVar

from engine.pool import Artifact, PoolChange
from engine.strategy.executor import ExecutorSpec

IndexT = TypeVar("IndexT")


class Archive(Protocol):
    """What strategies read of the run's archive (today one flat pool, engine/pool.py). Only the
    ledger writes it."""

    @property
    def version(self) -> int: ...

    def get(self, artifact_id: str) -> Artifact: ...

    def live(self) -> list[Artifact]: ...

    def confirmed(self) -> list[Artifact]: ...

    def best(self) -> Artifact | None: ...

    def index(self, key: Hashable, build) -> object: ...

    def changes_since(self, version: int) -> list[PoolChange]:
        """The pool changes after `version`, oldest first (what a stale note's repair reads)."""
        ...


@dataclass(frozen=True)
class Pick:
    """A selector's choice: the parent, and tags that travel with the item to the archive (e.g.
    the island it was picked in): the committed child's meta["selection"] carries them, so an
    archive can place the child and rebuild itself from the pool on resume."""

    parent_id: str
    tags: Mapping[str, str | int | float] = field(default_factory=dict)


class ParentSelector(Protocol):
    """Picks the artifact the next proposal improves, and ranks candidates for merges."""

    name: str

    def pick(self, archive: Archive, instances: Sequence[str], rng: random.Random) -> Pick:
        """The parent. `instances` are the ids the kind scores per instance (validation
        examples of a prompt task; a program task's one score)."""
        ...

    def merge_weights(self, archive: Archive, instances: Sequence[str]) -> Mapping[str, int]:
        """Fully validated artifacts a merge may combine, with weights (higher merges first)."""
        ...


class ContextBuilder(Protocol):
    """Chooses what the proposer sees besides its parent and the parent's evidence."""

    name: str

    def inspirations(self, archive: Archive, parent: Artifact, rng: random.Random) -> list[Artifact]:
        """Other artifacts shown to the proposer (best first), possibly none."""
        ...


@dataclass(frozen=True)
class Evidence:
    """One side of a gate: what a candidate (or its parent) did on the gate's examples (a prompt
    or adapter task's minibatch; a program task's one score, under the id "program")."""

    scores: Mapping[str, float]
    """example id -> score."""
    outputs: Mapping[str, str] = field(default_factory=dict)
    """example id -> what the candidate answered, where the kind kept it."""
    feedback: Mapping[str, str] = field(default_factory=dict)
    """example id -> what the metric said about it, where it said anything."""

    @property
    def total(self) -> float:
        return sum(self.scores.values())

    @classmethod
    def of_traces(cls, traces: Iterable[Mapping]) -> "Evidence":
        """From a kind's traces (dicts with example_id, score and, when known, output and feedback)."""
        traces = list(traces)
        return cls({t["example_id"]: float(t["score"]) for t in traces},
                   {t["example_id"]: str(t["output"]) for t in traces if t.get("output") is not None},
                   {t["example_id"]: str(t["feedback"]) for t in traces if t.get("feedback")})

    @classmethod
    def of_scores(cls, ids: Sequence[str], scores: Sequence[float]) -> "Evidence":
        return cls(dict(zip(ids, map(float, scores))))


class Acceptance(Protocol):
    """Decides whether a proposal's candidate is worth its full evaluation / its archive place."""

    name: str
    gated: bool
    """A gate evaluation (a minibatch for prompt tasks) runs first and must be passed; else the
    candidate goes straight to full evaluation and is admitted with whatever it scores."""

    def verdict(self, child: Evidence, parent: Evidence, *, tie_passes: bool) -> str | None:
        """None if the candidate passes its gate, else the reason it does not. Both sides are per
        example (scores, and outputs and feedback where the kind has them); `tie_passes` for a
        merge, which unites two validated edits."""
        ...


@dataclass(frozen=True)
class StageView:
    """What a strategy stage sees of an item (read-only)."""

    item_id: str
    parent: Artifact
    pool_version: int
    """The pool version the item was selected from."""
    notes: Mapping[str, str]
    """What earlier strategy stages wrote on the item (e.g. a plan)."""
    child: str | None = None
    """After evaluation: the candidate's text."""
    child_score: float | None = None
    """After evaluation: the candidate's score (a prompt's validation mean)."""
    refresh: bool = False
    """The stage's earlier note on this item went stale and was dropped (guarded policy): make a
    new one against the current pool, never reuse a shared one."""


@dataclass(frozen=True)
class EndedItem:
    """A work item that ended without reaching the archive (engine/strategy/protocols.py:
    Strategy.item_ended), as the kind saw it and as its stored row keeps it, so that a resumed
    run tells the strategy the same facts (engine/stages/strategy_stages.py replays the rows)."""

    item_id: str
    parent_id: str
    created_version: int
    outcome: str
    """failed (no usable candidate, or it did not evaluate), error, rejected, discarded_*, ..."""
    reason: str
    merge: bool = False
    child: str | None = None
    """The candidate's text, if the item got that far."""
    diff: str | None = None
    notes: Mapping[str, str] = field(default_factory=dict)


class StrategyEnv(Protocol):
    """The services a strategy stage may use; the task kind provides them."""

    archive: Archive
    rng: random.Random
    description: str
    """The task's description."""

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        """The proposer LLM's reply to `messages`, charged to the item; None if the call failed
        or was cut off (the stage falls back, as LoongFlow's executor does)."""
        ...


@dataclass(frozen=True)
class StrategyStage:
    """An LLM stage a strategy's proposal operator needs beside the kind's own (LoongFlow's
    planner and summarizer, ContextEvolve's context agents). It runs as a pipeline stage with
    its own workers; what it returns is added to the item's notes, which the committed child
    keeps in meta["notes"] and of which the proposer is shown the `guides` keys (as guidance)."""

    name: str
    when: Literal["before_propose", "after_evaluate"]
    run: Callable[[StageView, StrategyEnv], Awaitable[Mapping[str, str]]]
    workers: int = 4
    calls: int = 1
    """LLM calls one item costs here at most (budget reservations)."""
    guides: tuple[str, ...] = ()
    """The note keys of this stage the proposer is shown; the rest (fallback reasons, versions,
    what only later stages or the archive read) is kept in meta["notes"] only."""
    version_key: str = ""
    """The note key holding the pool version this stage's guiding notes were made from. Before
    the proposer sees them they go through the run's staleness policy (strategy_stages.py):
    full uses them as they are, guarded drops them and runs the stage again, reflective calls
    `revise` (or runs the stage again when there is none). "": never checked."""
    revise: Callable[[StageView, StrategyEnv], Awaitable[Mapping[str, str]]] | None = None
    """Reflective repair of stale notes: the view carries the stale notes and, as pool_version,
    the version they were made from; the archive's changes_since tells what changed since. It
    returns the revised notes (with a new version), or {} to drop them (a failed repair)."""


@dataclass(frozen=True)
class SearchParams:
    """Parameters the parts read: a program task's [program] settings, else these defaults."""

    tournament_size: int = 3
    elite_size: int = 8
    explore_prob: float = 0.2
    num_top: int = 2
    num_diverse: int = 1
    options: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    """Per-strategy settings by strategy name (the run's [strategy.<name>] table, validated by
    engine/config/__init__.py), as plain data so strategies need not import the config."""
    descriptors: Any = None
    """The task's declared MAP-Elites axes (engine/strategy/descriptors.py; None: the default axes)."""


@dataclass(frozen=True)
class Strategy:
    """A named composition of parts; both task kinds run it."""

    name: str
    summary: str
    selector: ParentSelector
    context: ContextBuilder
    acceptance: Acceptance
    merges: bool
    """Offers the merge operator (two archive artifacts that grew apart from a common ancestor,
    combined by a three-way merge; enabled per run by [pipeline] merge)."""
    stages: tuple[StrategyStage, ...] = ()
    """LLM stages of the strategy's proposal operator, in order (none: the kind's mutation)."""
    executor: ExecutorSpec | None = None
    """How the proposal is executed (LoongFlow's executor variants, engine/strategy/executor.py):
    on program tasks a candidate may be checked locally and repaired before validation. None:
    the kind's single-pass proposal."""
    component_choice: Callable[[Sequence[str], Sequence[Mapping], str], tuple[str, str]] | None = None
    """Which component of a multi-component parent a proposal rewrites: given the evolvable
    names, the parent's traces on the minibatch (dicts with score and feedback) and the name
    round robin would take, the chosen name and why. None: the kind's round robin."""
    audited: bool = False
    """Every transition of a proposal writes an audit row (engine/stages/audit.py; SEPL)."""
    item_ended: Callable[[EndedItem], None] | None = None
    """Told of every item that ends without reaching the archive (failed candidates, discarded
    stale items, ...), live and, on resume, once more for each stored one: it must be idempotent
    per item_id and derive nothing from the order in which it is told."""

    def describe(self) -> Iterable[str]:
        yield f"selection: {self.selector.name}"
        yield f"context: {self.context.name}"
        yield f"acceptance: {self.acceptance.name}"
        yield f"merge: {'yes' if self.merges else 'no'}"
        for st in self.stages:
            yield f"stage {st.name}: {st.when.replace('_', ' ')}"
