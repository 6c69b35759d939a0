"""The [strategy] section of a run's configuration: which search strategy, and the settings of
the strategies that have their own (loongflow's archive, contextevolve's agents)."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from pydantic import Field

from engine.service_config import StrictModel


class LoongFlowConfig(StrictModel):
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


class ContextEvolveConfig(StrictModel):
    """The contextevolve strategy's agents and selection ([strategy.contextevolve]; README "Strategies").
    Mirrors engine/strategy/context_agents.py: ContextEvolveSettings."""

    selection: Literal["tournament", "pareto", "islands"] = "tournament"
    """Parent selection: OpenEvolve's elite tournament, GEPA's Pareto front, or LoongFlow's islands
    (with the [strategy.loongflow] island settings)."""
    navigator_samples: int = Field(6, ge=1)
    """Transitions (parent -> child) the Navigator reads per call."""
    weight_improvement: float = Field(0.5, ge=0)
    weight_mixed: float = Field(0.2, ge=0)
    weight_decline: float = Field(0.3, ge=0)
    """Category weights of the Navigator's sample (one decline is always in it when there is any)."""
    guidance_refresh: int = Field(4, ge=0)
    """Items made within this many pool versions of the newest guidance reuse it; 0: every item asks."""
    exemplars: int = Field(3, ge=0)
    """Exemplars the Sampler picks."""
    sampler_candidates: int = Field(24, ge=1)
    """Artifacts the Sampler chooses among (the best half and the newest half)."""
    workers: int = Field(2, ge=1)
    """Workers of each agent's stage."""
    exemplars_as_code: bool = False
    """Also put an excerpt of each exemplar's code (its EVOLVE-BLOCK, at most 1500 characters) in the
    generator's prompt; false: exemplars are summaries and change digests only (fewer tokens)."""


class StrategyConfig(StrictModel):
    name: str | None = None
    """The search strategy (`evotui strategies` lists them): parent selection, context, proposal
    operators, acceptance and archive. None: the task kind's default (prompt: gepa, program:
    openevolve)."""
    loongflow: LoongFlowConfig = Field(default_factory=LoongFlowConfig)
    contextevolve: ContextEvolveConfig = Field(default_factory=ContextEvolveConfig)


ADDED_SINCE_STORED = {"loongflow": {"migration_trigger": "interval"}}
"""[strategy] settings added after earlier releases stored their runs, with the behaviour those
runs had: a stored table that lacks one ran with this value (a resumed or inspected run keeps it)."""


def upgrade_stored_strategy(strategy: Mapping[str, Any]) -> dict:
    """A stored run config's strategy table with the settings it predates filled in as it ran."""
    out = dict(strategy)
    for table, added in ADDED_SINCE_STORED.items():
        if isinstance(out.get(table), Mapping):
            out[table] = {**added, **out[table]}
    return out
