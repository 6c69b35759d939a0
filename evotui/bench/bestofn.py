"""The bench's best-of-N baseline: N independent proposals from the seed, no evolution.

A suite row `best-of-n` runs the engine with the strategy registered here: every proposal's
parent is the seed (never a child), the proposer sees only the seed and its own evidence, and
every candidate goes straight to the task's full evaluation (no gate), so the row's best is the
best of N proposals scored by the same evaluator, budget and proposer as the evolution rows.
If evolution does not beat it at equal proposals, the task tests nothing about evolution.

The strategy is registered when this module is imported (the bench imports it before building
a run); it is a bench instrument, so `evotui strategies` in a plain run does not list it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from engine.strategy.parts import ParentOnly, Population
from engine.strategy.protocols import Archive, Pick, SearchParams, Strategy
from engine.strategy.registry import entries, register

NAME = "best-of-n"
SUMMARY = "the seed is every proposal's parent, every candidate fully evaluated (best-of-N baseline)"
MODE = {"pipeline": {"mode": "sync"}}
"""Proposals one after another: with the seed always the parent no mode changes what is proposed,
and sync keeps the row's figures free of any scheduler effect."""


@dataclass(frozen=True)
class SeedOnly:
    """Always the seed (the oldest artifact of the archive); merges never offered."""

    name: str = "the seed, always (best-of-N)"

    def pick(self, archive: Archive, instances: Sequence[str], rng: random.Random) -> Pick:
        seed = min(archive.live(), key=lambda a: a.created_version)
        return Pick(seed.artifact_id)

    def merge_weights(self, archive: Archive, instances: Sequence[str]) -> Mapping[str, int]:
        return {}


def _best_of_n(params: SearchParams) -> Strategy:
    return Strategy(name=NAME, summary=SUMMARY, selector=SeedOnly(), context=ParentOnly(),
                    acceptance=Population(), merges=False)


if NAME not in {e.name for e in entries()}:  # a re-import (tests reload modules) registers once
    register(NAME, SUMMARY)(_best_of_n)


def layer() -> dict:
    """The run layer of a best-of-N row: this strategy, sequential, no merges."""
    return {"strategy": {"name": NAME}, "pipeline": {**MODE["pipeline"], "merge": False}}
