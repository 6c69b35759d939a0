"""What the orchestrator drives: a pipeline of stages declared by the search handlers.

The handlers (a task kind running a strategy, engine/stages/) declare their stages here; the
orchestrator, recorder, review gates and staleness checks read this declaration instead of
naming stages themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Mapping, Protocol

from engine.items import WorkItem

Handler = Callable[[WorkItem], Awaitable["WorkItem | None"]]
Spawn = Callable[..., "WorkItem | None"]
"""(parent_id, minibatch, stage, chain=None, rollout=None) -> the new item, or None (no budget, draining)."""


@dataclass(frozen=True)
class Selection:
    """What admission starts an item from: its parent, its minibatch, the selector's tags."""

    parent_id: str
    minibatch: list[str]
    tags: Mapping[str, str | int | float] = field(default_factory=dict)


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Handler
    checks_staleness: bool = False
    """The stage checks an item's version gap (the staleness policy) before working on it."""
    scalable: bool = True
    """Adaptive control may resize its worker set (not the single-writer update stage)."""
    workers: int = 1
    """Workers when [pipeline] workers names none for this stage (a strategy's own stages)."""


@dataclass(frozen=True)
class PipelineSpec:
    stages: tuple[StageSpec, ...]
    """In order, after the select stage (admission)."""
    reflect: StageSpec | None = None
    """Detour of stale items under the reflective policy; they rejoin at `reflect_to`."""
    reflect_to: str = ""
    merge_at: str | None = None
    """The stage merge items enter at; None when the handlers make no merges."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    @property
    def scalable(self) -> tuple[str, ...]:
        extra = (self.reflect,) if self.reflect is not None else ()
        return tuple(s.name for s in (*self.stages, *extra) if s.scalable)

    @property
    def checked(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages if s.checks_staleness)

    @property
    def first(self) -> str:
        return self.stages[0].name


class SearchHandlers(Protocol):
    """A task kind running a strategy (engine/stages/kinds.py builds one)."""

    def pipeline(self) -> PipelineSpec: ...

    chain_workers: Mapping[str, int]
    """mode chain: the kind's own worker counts for some stages (a program task: its evaluation
    slots); the others keep the mode's."""

    def bind(self, recorder, spawn: Spawn, wake: Callable[[], None] | None = None) -> None:
        """The run's recorder (rows, staleness decisions), the orchestrator's spawn and `wake`:
        admission looks again (an item released its proposal slot mid-stage)."""
        ...

    def select(self) -> Selection:
        """Parent, minibatch and selection tags of the next item."""
        ...

    def admitted(self, item: WorkItem) -> None:
        """A new item is about to enter the pipeline's first stage."""
        ...

    def estimate(self) -> dict[str, float]:
        """Worst-case cost of one item, reserved from the budget at admission."""
        ...

    def select_merge(self) -> dict | None:
        """A merge to run (ours, theirs, base, text, minibatch), or None."""
        ...

    def estimate_merge(self) -> dict[str, float]: ...

    async def evaluate_seed(self) -> None: ...

    def abandoned(self, item: WorkItem) -> None:
        """An item ended without reaching the archive: release what it holds there."""
        ...

    def ended(self, item: WorkItem) -> None:
        """An item ended without reaching the archive, its row saved (its outcome and
        reason say how): the strategy learns of it (e.g. a failed candidate)."""
        ...

    def figures(self) -> dict:
        """Kind-specific figures for the run's summary."""
        ...

    async def aclose(self) -> None:
        """Release the kind's services (an evaluation cluster) at the run's end."""
        ...
