"""loongflow: LoongFlow (Wan et al. 2025): its evolutionary memory and its PES agents. Islands
in a ring, each a MAP-Elites grid over text length and novelty, or the axes task.toml declares
([[descriptor]], descriptors.py) (engine/selection/islands.py),
elites migrating to both neighbours every few commits; a parent by adaptive Boltzmann selection
within an island, its temperature following the island's diversity, each elite's weight divided
by 1 + its cell's parent visits (boltzmann.py); the parent
shown with its island's top elites; every evaluated candidate joins (cells keep the best). With
`pes` (the default) each proposal is planned from the parent's lineage and summarized after its
evaluation (pes.py); `pes = false` leaves the kind's plain proposal."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field

from engine.selection.islands import IslandSettings
from engine.config.service import StrictModel
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
SELECTOR_KEYS = ("temperature_rule", "tau_base", "explore_prob", "stagnation_k", "visit_counts")


class LoongFlowOptions(StrictModel):
    """The loongflow strategy's archive and selection ([strategy.loongflow]; README "Strategies")."""

    islands: int = Field(3, ge=1)
    """Islands in a ring; children stay in the island their parent was picked in."""
    migration_interval: int = Field(10, ge=1)
    """Every this many committed artifacts the ring's neighbours are compared for migration."""
    migration_threshold: float = Field(0.1, ge=0, le=1)
    """Elites migrate along a ring edge only when its islands' diversity (normalised cell entropy,
    engine/selection/island_migration.py) differs by more than this (the paper sets no value)."""
    migration_trigger: Literal["diversity", "interval"] = "diversity"
    """diversity: LoongFlow §4.2.1 (above); interval: every island's top elites join both ring
    neighbours every `migration_interval` commits (the earlier behaviour, OpenEvolve's)."""
    migration_share: float = Field(0.2, gt=0, le=1)
    """The share of an island's elites that migrates (at least one)."""
    bins: int | None = Field(None, ge=1)
    """MAP-Elites bins per feature dimension; None: the integer square root of the island's size."""
    population_cap: int = Field(30, ge=1)
    """Members per island; the worst non-elites are evicted first, the global best never."""
    temperature_rule: Literal["paper", "released_code"] = "paper"
    """How the Boltzmann temperature follows an island's diversity (engine/strategy/boltzmann.py)."""
    tau_base: float = Field(1.0, gt=0)
    explore_prob: float = Field(0.1, ge=0, le=1)
    """Chance of a uniform pick among the island's members (doubled while the island stagnates)."""
    stagnation_k: int = Field(10, ge=1)
    """An island whose best has not improved over this many commits stagnates."""
    visit_counts: bool = True
    """Each elite's Boltzmann weight divided by 1 + the parent picks its cell has had (LoongFlow
    Listing 1), so less-visited cells are preferred; false: plain Boltzmann (boltzmann.py)."""
    inspirations: int = Field(3, ge=0)
    """The island's top elites shown to the proposer besides the parent."""
    pes: bool = True
    """Plan-Execute-Summarize: a planner stage before each proposal, a summarizer after its
    evaluation (engine/strategy/pes.py); false: the kind's plain proposal."""
    lineage_depth: int = Field(4, ge=1)
    """Generations the planner reads: the parent and its first-parent ancestors."""
    planner_workers: int = Field(4, ge=1)
    summarizer_workers: int = Field(4, ge=1)
    executor: Literal["chat", "react", "fuse"] = "react"
    """The executor variant (engine/strategy/executor.py): chat proposes in one pass; react checks a
    program candidate locally (parse, compile, imports; nothing run) and asks for repairs; fuse is
    chat below `fuse_threshold` and react from it on."""
    executor_fix_rounds: int = Field(2, ge=0)
    """Repair calls per proposal at most (the paper gives none; 2 is the released code's react_max_steps)."""
    fuse_threshold: float = 0.9
    """fuse: the parent score from which the executor checks and repairs (the released code's 0.9)."""


def island_options(strategy: Mapping[str, Any]) -> Mapping[str, Any]:
    """loongflow always runs islands: its [strategy.loongflow] table."""
    return strategy.get("loongflow") or {}


def _options(params: SearchParams) -> Mapping[str, object]:
    # LoongFlowOptions validated these (the run's config); a run built without a config has none.
    return params.options.get("loongflow", {})


@register("loongflow", SUMMARY, options=LoongFlowOptions, island_options=island_options)
def loongflow(params: SearchParams) -> Strategy:
    opts = _options(params)
    settings = IslandSettings(**{k: opts[k] for k in ISLAND_KEYS if k in opts},  # type: ignore[arg-type]
                              descriptors=params.descriptors)
    selector = BoltzmannIslandSelector(settings, **{k: opts[k] for k in SELECTOR_KEYS if k in opts})  # type: ignore[arg-type]
    context = IslandElites(settings, int(opts.get("inspirations", 3)))  # type: ignore[arg-type]
    stages = pes_stages(int(opts.get("lineage_depth", 4)), int(opts.get("planner_workers", 4)),  # type: ignore[call-overload]
                        int(opts.get("summarizer_workers", 4))) if opts.get("pes", True) else ()  # type: ignore[call-overload]
    executor = ExecutorSpec(str(opts.get("executor", "react")), int(opts.get("executor_fix_rounds", 2)),  # type: ignore[call-overload]
                            float(opts.get("fuse_threshold", 0.9)))  # type: ignore[arg-type]
    return Strategy(name="loongflow", summary=SUMMARY, selector=selector, context=context,
                    acceptance=Population(), merges=False, stages=stages, executor=executor)
