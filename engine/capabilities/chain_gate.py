"""A chain step's fused gate, decided as soon as its outcome is certain (speculative completion).

The gate runs three sides at once: the candidate on its own minibatch and on the next one, and
the head on the next one. It passes when the candidate's scores on both minibatches sum to more
than the head's (its known ones on the own minibatch plus the new ones). Answer lengths have a
long tail, so the slowest answer decides when a step ends. But scores lie in the task's range,
so the outcome is often fixed before the last answers arrive: when even the best scores for the
missing answers could not change it. The next step needs only one side's traces on the next
minibatch (the candidate's if it passed, the head's if not), so once the outcome is certain and
that side is complete the step is handed on and the other answers are cancelled. The decision
is the one the full gate would take, answer for answer; only the waiting and the tokens of the
unneeded answers go (the first saves critical-path time, the second load on a batching server).

A side is a list of pending parts, each a future of `Answers` for a known number of examples:
a prompt task runs one part per example (the finest early decision), an adapter one part per
side (its `evaluate` scores a whole batch at once). A task whose scores have no known range
decides only once every answer is in.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Answers:
    """Traces of a candidate on some examples, in order; `native`: what the kind's own code made
    of them (an adapter's EvaluationBatch, needed for its reflective dataset), if anything."""

    traces: list[dict]
    native: list[Any] = field(default_factory=list)

    @classmethod
    def joined(cls, parts: list["Answers"]) -> "Answers":
        return cls([t for p in parts for t in p.traces], [n for p in parts for n in p.native])


Part = tuple[asyncio.Future, int]
"""A future of Answers and how many examples it answers."""

StartSide = Callable[[str, list[str], str, bool], list[Part]]
"""(text, example ids, stage, capture traces) -> the side's parts, started."""


def _bound(total: float, per: float, missing: int) -> float:
    return total + per * missing if missing else total  # never inf * 0


def verdict(child: list[float], child_missing: int, head: list[float], head_missing: int,
            parent_own: float, lo: float, hi: float) -> bool | None:
    """True (passes), False (fails) or None (the missing answers could still change it). A pass
    is child_sum > parent_own + head_sum with scores in [lo, hi]; the bounds take every missing
    answer at its extreme (with none missing, both bounds are the sums: the full gate)."""
    child_sum, head_sum = sum(child), parent_own + sum(head)
    child_low, child_high = _bound(child_sum, lo, child_missing), _bound(child_sum, hi, child_missing)
    head_low, head_high = _bound(head_sum, lo, head_missing), _bound(head_sum, hi, head_missing)
    if child_low > head_high:
        return True
    if child_high <= head_low:
        return False
    return None


@dataclass(frozen=True)
class GateResult:
    passed: bool
    child_own: list[dict]
    """The candidate's answers on its own minibatch that arrived (all of them unless decided early)."""
    child_next: Answers
    """The candidate's answers on the next minibatch (complete when it passed)."""
    head_next: Answers
    """The head's answers on the next minibatch (complete when it failed)."""
    cancelled: int
    """Answers not waited for."""


async def decide(start: StartSide, child: str, own_mb: list[str], next_mb: list[str], head: str,
                 parent_own: float, score_range: tuple[float, float], early: bool) -> GateResult:
    """Run the gate's sides and return its outcome; with `early`, as soon as it is certain and
    the next step's traces are complete. The first failure cancels every answer and is raised
    (as a whole-batch run does)."""
    own = start(child, own_mb, "evaluate", False)
    nxt = start(child, next_mb, "evaluate", True)
    heads = start(head, next_mb, "rollout", True)
    every = [*own, *nxt, *heads]
    futures = [f for f, _ in every]
    lo, hi = score_range
    if not (math.isfinite(lo) and math.isfinite(hi)):
        early = False  # no bound on a missing answer: only the full gate decides
    try:
        while True:
            pending = [f for f in futures if not f.done()]
            if pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in done:
                    f.result()  # a failure ends the gate here
            outcome = verdict(_scores(own + nxt), _missing(own + nxt), _scores(heads), _missing(heads),
                              parent_own, lo, hi)
            if outcome is None or (not early and any(not f.done() for f in futures)):
                continue
            needed = nxt if outcome else heads
            if all(f.done() for f, _ in needed):
                cancelled = sum(n for f, n in every if not f.done())
                return GateResult(outcome, _done(own).traces, _done(nxt), _done(heads), cancelled)
    finally:
        for f in futures:
            f.cancel()
        await asyncio.gather(*futures, return_exceptions=True)


def _done(side: list[Part]) -> Answers:
    return Answers.joined([f.result() for f, _ in side if f.done()])


def _scores(side: list[Part]) -> list[float]:
    return [t["score"] for t in _done(side).traces]


def _missing(side: list[Part]) -> int:
    return sum(n for f, n in side if not f.done())
