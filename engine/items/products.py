"""What the stages hand on to each other, typed: one frozen record per product.

A stage sets a product (or a new copy of it, `dataclasses.replace`) on its item's field of that
name (engine/items/work_item.py); the next stages read its attributes. Stored rows keep the flat
payload layout of earlier releases: a product's field names are its stored keys, a field left
at None (False for a flag) is a key that is not there, so items saved by earlier releases
resume unchanged and rows written now read the same to the exporter, the TUI and the queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar


@dataclass(frozen=True)
class Rollout:
    """The parent's answers on the item's minibatch (rollout stage, or a chain's hand-on): the
    reflective dataset's traces and the minibatch gate's parent side."""

    traces: list[dict] | None = None
    """One record per example (example_id, input, output, score, feedback)."""
    parent_mb: list[float] | None = None
    """The parent's minibatch scores, in minibatch order."""
    parent_mb_of: str | None = None
    """The artifact those scores are of (a rebased candidate's new parent is scored again)."""


@dataclass(frozen=True)
class Proposal:
    """What the propose stage made of the parent, and how: the child text (None if it failed:
    the item's reason says why) and the choices and repairs that led to it."""

    child: str | None = None
    diff: str | None = None
    """Program kind: the unified diff parent -> child."""
    changed_components: list[str] | None = None
    next_component: int | None = None
    """Component round robin: the parent's next turn after this one (the child's meta keeps it)."""
    component_choice: list | None = None
    """[name, why] when the strategy chose the component (SEPL's blame)."""
    refused_components: dict[str, str] | None = None
    """Component updates refused by their rules and put back to the parent's text: name -> why."""
    patch_retries: int | None = None
    executor_fix: dict | None = None
    """The strategy executor's local check and repair (engine/stages/executor_fix.py)."""
    rebased: dict | None = None
    """The child was moved onto another parent or chain head (repair or chain rebase): from where."""
    rebase_checked: bool = False
    """Program kind: a rebased child passed the filters again."""
    edited: bool = False
    """A reviewer edited the child at a review gate."""


@dataclass(frozen=True)
class GateScores:
    """The minibatch gate: the child's scores and, in mode chain, the minibatch drawn for the
    step (kept so a resume reuses it) and how many of its answers an early decision cancelled."""

    child_mb: list[float] | None = None
    next_mb: list[str] | None = None
    gate_cancelled: int | None = None


@dataclass(frozen=True)
class Validation:
    """Full validation, per example (prompt and adapter kinds)."""

    val: dict[str, float]
    val_feedback: dict[str, str] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return sum(self.val.values()) / len(self.val)


@dataclass(frozen=True)
class ProgramEvaluation:
    """A program's evaluation (program kind): its score as the pool sees it and what the
    evaluator reported; the cycling guard's finding, made at validate, comes first."""

    recycled_lines: dict | None = None
    eval_s: float | None = None
    score: float | None = None
    raw_score: float | None = None
    """The score before the cycling guard's penalty (penalise only)."""
    metrics: dict | None = None
    feedback: dict | None = None


@dataclass(frozen=True)
class RolloutRelease:
    """Speculative rollout (engine/capabilities/speculative_rollout.py): the examples whose answers
    the proposer saw, of how many, how many came late; then whether those were joined before the
    gate or, for an item that ended first, how many late ones had finished and how many were
    cancelled. Stored as one record under `speculative_rollout`."""

    seen: list[str]
    of: int
    late: int
    joined: bool = False
    late_finished: int | None = None
    cancelled: int | None = None

    def to_record(self) -> dict:
        return to_stored(self)

    @classmethod
    def from_record(cls, record: dict) -> "RolloutRelease":
        return cls(**{k: record[k] for k in stored_keys(cls) if k in record})


@dataclass(frozen=True)
class RepairDecision:
    """The reflect stage's verdict on a stale program proposal (engine/capabilities/program_repair.py):
    keep, patch, discard or malformed, why, at which pool version, and what it was shown. Stored
    as one record under `repair`, the detail's keys beside the other three."""

    verdict: str
    reason: str
    at_version: int
    detail: dict = field(default_factory=dict)
    """best, changes, shown, omitted, mechanical, llm (those the decision had)."""

    def to_record(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "at_version": self.at_version, **self.detail}

    @classmethod
    def from_record(cls, record: dict) -> "RepairDecision":
        rest = dict(record)
        return cls(str(rest.pop("verdict")), str(rest.pop("reason")), int(rest.pop("at_version")), rest)


P = TypeVar("P")


def stored_keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def to_stored(product: Any) -> dict:
    """The product's keys in the flat stored layout: every field that is set."""
    out = {}
    for f in fields(product):
        value = getattr(product, f.name)
        if value is not None and value is not False:
            out[f.name] = value
    return out


def from_stored(cls: type[P], payload: dict) -> P | None:
    """The product read from a stored payload, its keys taken out of it; None if none is there."""
    found = {k: payload.pop(k) for k in stored_keys(cls) if k in payload}
    return cls(**found) if found else None
