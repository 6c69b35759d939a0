"""gepa: GEPA's search (Agrawal et al. 2025). A parent from the per-instance Pareto front,
reflective mutation from its own evidence, a minibatch gate against the parent before full
validation, and merges of front artifacts that share an ancestor."""

from __future__ import annotations

from engine.strategy.parts import ParentGate, ParentOnly, ParetoSelector
from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import register

SUMMARY = "Pareto-front parents, reflective mutation, minibatch gate, merges (GEPA)"


@register("gepa", SUMMARY)
def gepa(params: SearchParams) -> Strategy:
    return Strategy(name="gepa", summary=SUMMARY,
                    selector=ParetoSelector(), context=ParentOnly(), acceptance=ParentGate(), merges=True)
