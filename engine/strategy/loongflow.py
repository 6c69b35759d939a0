"""loongflow: LoongFlow (Wan et al. 2025): its evolutionary memory and its PES agents. Islands
in a ring, each a MAP-Elites grid over text length and novelty (engine/selection/islands.py),
elites migrating to both neighbours every few commits; a parent by adaptive Boltzmann selection
within an island, its temperature following the island's diversity (boltzmann.py); the parent
shown with its island's top elites; every evaluated candidate joins (cells keep the best). With
`pes` (the default) each proposal is planned from the parent's lineage and summarized after its
evaluation (pes.py); `pes = false` leaves the kind's plain proposal."""

from __future__ import annotations

from typing import Mapping

from engine.selection.islands import IslandSettings
from engine.strategy.boltzmann import BoltzmannIslandSelector, IslandElites
from engine.strategy.executor import ExecutorSpec
from engine.strategy.parts import Population
from engine.strategy.pes import pes_stages
from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import register

SUMMARY = ("island ring of MAP-Elites grids, migration, adaptive Boltzmann parents, whole population, "
           "Plan-Execute-Summarize from the lineage (LoongFlow)")

ISLAND_KEYS = ("islands", "migration_interval", "migration_share", "bins", "population_cap",
               "migration_threshold", "migration_trigger")
SELECTOR_KEYS = ("temperature_rule", "tau_base", "explore_prob", "stagnation_k")


def _options(params: SearchParams) -> Mapping[str, object]:
    # engine/strategy_config.py (LoongFlowConfig) validated these; a run built without a config has none.
    return params.options.get("loongflow", {})


@register("loongflow", SUMMARY)
def loongflow(params: SearchParams) -> Strategy:
    opts = _options(params)
    settings = IslandSettings(**{k: opts[k] for k in ISLAND_KEYS if k in opts})  # type: ignore[arg-type]
    selector = BoltzmannIslandSelector(settings, **{k: opts[k] for k in SELECTOR_KEYS if k in opts})  # type: ignore[arg-type]
    context = IslandElites(settings, int(opts.get("inspirations", 3)))  # type: ignore[arg-type]
    stages = pes_stages(int(opts.get("lineage_depth", 4)), int(opts.get("planner_workers", 4)),  # type: ignore[call-overload]
                        int(opts.get("summarizer_workers", 4))) if opts.get("pes", True) else ()  # type: ignore[call-overload]
    executor = ExecutorSpec(str(opts.get("executor", "react")), int(opts.get("executor_fix_rounds", 2)),  # type: ignore[call-overload]
                            float(opts.get("fuse_threshold", 0.9)))  # type: ignore[arg-type]
    return Strategy(name="loongflow", summary=SUMMARY, selector=selector, context=context,
                    acceptance=Population(), merges=False, stages=stages, executor=executor)
