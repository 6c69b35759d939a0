"""Staleness policies (FlashEvolve §3.2).

A policy looks at an item's version gap where a checked stage consumes it and decides what
happens. `full` lets everything pass; `guarded(max_gap)` discards items whose gap exceeds the
threshold. The reflective policy plugs in later by returning "reflect" (route to a reflect stage).
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

    def decide(self, gap: int) -> Decision: ...


class FullPolicy:
    name = "full"

    def decide(self, gap: int) -> Decision:
        return Decision("pass", "full async: never checked" if gap else "fresh")


class GuardedPolicy:
    name = "guarded"

    def __init__(self, max_gap: int) -> None:
        self.max_gap = max_gap

    def decide(self, gap: int) -> Decision:
        if gap > self.max_gap:
            return Decision("discard", f"gap {gap} > max_gap {self.max_gap}")
        return Decision("pass", f"gap {gap} <= max_gap {self.max_gap}")


def make_policy(name: str, max_gap: int) -> StalenessPolicy:
    if name == "full":
        return FullPolicy()
    if name == "guarded":
        return GuardedPolicy(max_gap)
    raise ValueError(f"unknown staleness policy {name!r}; use full or guarded")
