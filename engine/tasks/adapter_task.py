"""The adapter task kind's task: a GEPA-style adapter object and its data, held in memory.

`evotui.optimize` (evotui/library/api.py) builds one from Python objects; nothing of it is on disk, so
a run of this kind cannot be resumed from the CLI (the adapter is code in the caller's process).
Examples are whatever the adapter takes; the engine only names them: "t0".."tN" for the
training set, "v0".."vN" for the validation set (the ids of the per-example val_scores).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from engine.components import DEFAULT_TYPE, Component, Components, render, with_rules

TASK_PATH = "python:evotui.optimize (an adapter object in a Python process, not on disk: not resumable from the CLI)"
"""What the runs table stores as the task path: not a folder, so `evotui resume` refuses it."""

ProposeFn = Callable[[dict[str, str], dict[str, list[dict]], list[str]], dict[str, str]]


@dataclass(frozen=True)
class AdapterTask:
    name: str
    description: str
    train: Sequence[Any]
    val: Sequence[Any]
    seed_components: Components
    adapter: Any
    """Has evaluate(batch, candidate, capture_traces) and make_reflective_dataset(candidate,
    eval_batch, components_to_update) (checked by evotui/library/api.py)."""
    propose_new_texts: ProposeFn | None = None
    """The adapter's own proposer, if it has one (GEPA's optional method): used instead of the
    reflection LLM."""
    max_score: float = 1.0
    """A parent scoring at least this on every minibatch example is not reflected on (GEPA's
    perfect score)."""
    kind: str = "adapter"
    path: str = TASK_PATH
    defaults: dict = field(default_factory=dict)

    @property
    def seed_prompt(self) -> str:
        return render(self.seed_components)

    @property
    def train_ids(self) -> list[str]:
        return [f"t{i}" for i in range(len(self.train))]

    @property
    def val_ids(self) -> list[str]:
        return [f"v{i}" for i in range(len(self.val))]

    def example(self, example_id: str) -> Any:
        split = self.train if example_id[0] == "t" else self.val
        return split[int(example_id[1:])]


def seed_components(candidate: dict[str, str], types: dict[str, str] | None = None,
                    frozen: dict[str, list[str]] | None = None) -> Components:
    """One evolvable component per key, in the dict's order, with its type (default "text") and
    frozen regions (engine/components/__init__.py); ValueError for an unknown type or component name, a
    region not in its text or a seed text its type does not allow."""
    types, frozen = types or {}, frozen or {}
    for label, given in (("component_types", types), ("frozen_regions", frozen)):
        unknown = [n for n in given if n not in candidate]
        if unknown:
            raise ValueError(f"{label} names {', '.join(map(repr, unknown))}, not in seed_candidate (its components: "
                             f"{', '.join(candidate)})")
    return tuple(with_rules(Component(name, text), types.get(name, DEFAULT_TYPE), frozen.get(name, ()))
                 for name, text in candidate.items())


def as_candidate(parts: Sequence[Component]) -> dict[str, str]:
    """The dict an adapter receives."""
    return {c.name: c.text for c in parts}
