"""Staleness policies (FlashEvolve §3.2).

A policy looks at an item's version gap where a checked stage consumes it and decides what
happens. `full` lets everything pass; `guarded(max_gap)` discards items whose gap exceeds the
threshold; `reflective(max_gap)` routes stale proposals to the reflect stage. The policy is a
leaf module (it imports nothing from engine) because the run context holds the current one and
must not depend on the pipeline; the pipeline's recorder applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Action = Literal["pass", "discard", "reflect"]


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


class StalenessPolicy(Protocol):
    name: str

    def decide(self, gap: int, reflectable: bool = False) -> Decision:
        """reflectable: the item carries a proposal here that the reflect stage could repair
        (the stage the pipeline routes reflected items back to)."""
        ...


class FullPolicy:
    name = "full"

    def decide(self, gap: int, reflectable: bool = False) -> Decision:
        return Decision("pass", "full async: never checked" if gap else "fresh")


class GuardedPolicy:
    name = "guarded"

    def __init__(self, max_gap: int) -> None:
        self.max_gap = max_gap

    def decide(self, gap: int, reflectable: bool = False) -> Decision:
        if gap > self.max_gap:
            return Decision("discard", f"gap {gap} > max_gap {self.max_gap}")
        return Decision("pass", f"gap {gap} <= max_gap {self.max_gap}")


class ReflectivePolicy:
    """Stale items that carry a proposal go to the reflect stage; the LLM decides keep, patch
    (rebased on the current pool) or discard. Items without a proposal yet pass."""

    name = "reflective"

    def __init__(self, max_gap: int) -> None:
        self.max_gap = max_gap

    def decide(self, gap: int, reflectable: bool = False) -> Decision:
        if gap > self.max_gap and reflectable:
            return Decision("reflect", f"gap {gap} > {self.max_gap}: reflect against the pool changes")
        return Decision("pass", "fresh" if gap <= self.max_gap else f"gap {gap}: no proposal to reflect on yet")


def make_policy(name: str, max_gap: int) -> StalenessPolicy:
    if name == "full":
        return FullPolicy()
    if name == "guarded":
        return GuardedPolicy(max_gap)
    if name == "reflective":
        return ReflectivePolicy(max_gap)
    raise ValueError(f"unknown staleness policy {name!r}; use full, guarded or reflective")
