"""A chain step's fused gate, decided as soon as its outcome is certain (speculative completion).

The gate runs nine answers at once: the candidate on its own minibatch and on the next one, and
the head on the next one. It passes when the candidate's six scores sum to more than the head's
(its three known ones on the own minibatch plus the three new ones). Answer lengths have a long
tail, so the slowest of nine decides when a step ends. But scores lie in the task's range, so
the outcome is often fixed before the last answers arrive: when even the best scores for the
missing answers could not change it. The next step needs only one side's traces on the next
minibatch (the candidate's if it passed, the head's if not), so once the outcome is certain and
that side is complete the step is handed on and the other answers are cancelled. The decision
is the one the full gate would take, answer for answer; only the waiting and the tokens of the
unneeded answers go (the first saves critical-path time, the second load on a batching server).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable


def verdict(child: list[float], child_missing: int, head: list[float], head_missing: int,
            parent_own: float, lo: float, hi: float) -> bool | None:
    """True (passes), False (fails) or None (the missing answers could still change it). A pass
    is child_sum > parent_own + head_sum with scores in [lo, hi]; the bounds take every missing
    answer at its extreme (with none missing, both bounds are the sums: the full gate)."""
    child_sum, head_sum = sum(child), parent_own + sum(head)
    child_low, child_high = child_sum + lo * child_missing, child_sum + hi * child_missing
    head_low, head_high = head_sum + lo * head_missing, head_sum + hi * head_missing
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
    child_next: list[dict]
    """The candidate's answers on the next minibatch (complete when it passed)."""
    head_next: list[dict]
    """The head's answers on the next minibatch (complete when it failed)."""
    cancelled: int
    """Answers not waited for."""


RunOne = Callable[[str, str, str], Awaitable[dict]]


async def decide(run_one: RunOne, child: str, own_mb: list[str], next_mb: list[str], head: str,
                 parent_own: float, score_range: tuple[float, float], early: bool,
                 head_next: list[asyncio.Future] | None = None) -> GateResult:
    """Run the gate's answers and return its outcome; with `early`, as soon as it is certain and
    the next step's traces are complete. `head_next`: the head's answers already started
    (prefetch). The first failure cancels every answer and is raised (as run_examples does)."""
    own = [asyncio.ensure_future(run_one(child, ex, "evaluate")) for ex in own_mb]
    nxt = [asyncio.ensure_future(run_one(child, ex, "evaluate")) for ex in next_mb]
    heads = head_next if head_next is not None else [asyncio.ensure_future(run_one(head, ex, "rollout"))
                                                     for ex in next_mb]
    every = [*own, *nxt, *heads]
    lo, hi = score_range
    try:
        while True:
            pending = [f for f in every if not f.done()]
            if pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for f in done:
                    f.result()  # a failure ends the gate here
            child_scores, head_scores = _scores(own + nxt), _scores(heads)
            outcome = verdict(child_scores, len(own) + len(nxt) - len(child_scores),
                              head_scores, len(heads) - len(head_scores), parent_own, lo, hi)
            if outcome is None or (not early and any(not f.done() for f in every)):
                continue
            needed = nxt if outcome else heads
            if all(f.done() for f in needed):
                cancelled = sum(not f.done() for f in every)
                return GateResult(outcome, _results(own), _results(nxt), _results(heads), cancelled)
    finally:
        for f in every:
            f.cancel()
        await asyncio.gather(*every, return_exceptions=True)


def _scores(futures: list[asyncio.Future]) -> list[float]:
    return [f.result()["score"] for f in futures if f.done()]


def _results(futures: list[asyncio.Future]) -> list[dict]:
    return [f.result() for f in futures if f.done()]
