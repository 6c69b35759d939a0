"""openevolve: OpenEvolve's search (after AlphaEvolve). A tournament among the elite (sometimes
any artifact), the parent shown with the best and some random other artifacts as inspirations,
diff or rewrite proposals, and every evaluated candidate in the population. Merges of elite
artifacts (evotui's addition; off with [pipeline] merge = false) keep what program runs had."""

from __future__ import annotations

from engine.strategy.parts import Population, TopAndDiverse, TournamentSelector
from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import register

SUMMARY = "elite tournament, top + diverse inspirations, diff/rewrite, whole population (OpenEvolve)"


@register("openevolve", SUMMARY)
def openevolve(params: SearchParams) -> Strategy:
    return Strategy(name="openevolve", summary=SUMMARY,
                    selector=TournamentSelector(params.tournament_size, params.elite_size, params.explore_prob),
                    context=TopAndDiverse(params.num_top, params.num_diverse), acceptance=Population(), merges=True)
