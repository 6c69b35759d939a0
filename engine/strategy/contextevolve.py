"""contextevolve: ContextEvolve's context agents (Su, Zheng, Li 2025) on any parent selection.

The proposer sees its parent, the Navigator's directional guidance and the Sampler's exemplars
(ids, scores, summaries and a digest of each one's change; with exemplars_as_code a bounded
excerpt of each one's code) as the strategy's guidance section; no other artifact's full text
(the paper's thesis: compressed context, fewer tokens). The Summarizer abstracts each evaluated
child's code against its parent's abstract, so the transitions later items see are summaries. Every evaluated candidate joins the
population (a decline is a transition the Navigator learns from). Parent selection is
[strategy.contextevolve] selection: "tournament" (OpenEvolve's), "pareto" (GEPA's) or "islands"
(LoongFlow's island ring with Boltzmann selection, its [strategy.loongflow] settings).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping

from pydantic import Field

from engine.pool import Artifact
from engine.selection.islands import IslandSettings
from engine.config.service import StrictModel
from engine.strategy.boltzmann import BoltzmannIslandSelector
from engine.strategy.context_agents import ContextAgents, ContextEvolveSettings
from engine.strategy.parts import ParetoSelector, Population, TournamentSelector
from engine.strategy.protocols import Archive, ParentSelector, SearchParams, Strategy, StrategyStage
from engine.strategy.registry import register

SUMMARY = "Summarizer, Navigator and Sampler agents compress the history into the proposer's context (ContextEvolve)"
SELECTIONS = ("tournament", "pareto", "islands")
# The same island settings as loongflow's own (and the task's declared axes): `evotui show`, the
# islands screen and the migrations rows describe this fold with them.
ISLAND_KEYS = ("islands", "migration_interval", "migration_share", "bins", "population_cap",
               "migration_threshold", "migration_trigger")
SELECTOR_KEYS = ("temperature_rule", "tau_base", "explore_prob", "stagnation_k")


@dataclass(frozen=True)
class AgentContext:
    """No inspirations: the exemplars reach the proposer as the Sampler's note (summaries, a digest
    of each change, code excerpts with exemplars_as_code), as a context builder does not see the
    item's notes.

    It also keeps the agents' state with the run state (KeepsState, engine/run/state.py): the
    Navigator's newest guidance, which items share until a child carrying it is committed (one
    made by an item whose candidate then failed is in no artifact), so a resumed run shares the
    guidance the killed one would have."""

    agents: ContextAgents | None = None
    name: str = "parent + Navigator guidance + Sampler exemplars as summaries (ContextEvolve)"
    state_key: str = "contextevolve.navigator"

    def inspirations(self, archive: Archive, parent: Artifact, rng) -> list[Artifact]:
        return []

    def state(self) -> dict:
        return self.agents.navigator_state() if self.agents is not None else {}

    def restore(self, state: Mapping[str, Any]) -> None:
        if self.agents is not None:
            self.agents.restore_navigator(state)


class ContextEvolveOptions(StrictModel):
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


def island_options(strategy: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """With selection "islands", loongflow's island ring and its [strategy.loongflow] settings."""
    if (strategy.get("contextevolve") or {}).get("selection") != "islands":
        return None
    return strategy.get("loongflow") or {}


def settings_from(options: Mapping[str, object]) -> ContextEvolveSettings:
    # ContextEvolveOptions validated these (the run's config); a run built without a config has none.
    known = {f.name for f in fields(ContextEvolveSettings)}
    return ContextEvolveSettings(**{k: v for k, v in options.items() if k in known})  # type: ignore[arg-type]


def selector_for(selection: str, params: SearchParams) -> ParentSelector:
    if selection == "pareto":
        return ParetoSelector()
    if selection == "islands":
        lf = params.options.get("loongflow", {})
        settings = IslandSettings(**{k: lf[k] for k in ISLAND_KEYS if k in lf},  # type: ignore[arg-type]
                                  descriptors=params.descriptors)
        return BoltzmannIslandSelector(settings, **{k: lf[k] for k in SELECTOR_KEYS if k in lf})  # type: ignore[arg-type]
    if selection == "tournament":
        return TournamentSelector(params.tournament_size, params.elite_size, params.explore_prob)
    raise ValueError(f"[strategy.contextevolve] selection must be one of {', '.join(SELECTIONS)}, not {selection!r}")


@register("contextevolve", SUMMARY, options=ContextEvolveOptions, island_options=island_options)
def contextevolve(params: SearchParams) -> Strategy:
    settings = settings_from(params.options.get("contextevolve", {}))
    agents = ContextAgents(settings)
    stages = (StrategyStage("navigate", "before_propose", agents.navigate, workers=settings.workers, calls=2,
                            guides=("guidance",), version_key="guidance_version", revise=agents.revise_guidance),
              # Stale exemplar choices are made again against the current pool (no LLM repair:
              # picking afresh is the repair), under guarded and reflective alike.
              StrategyStage("sample", "before_propose", agents.sample, workers=settings.workers, guides=("exemplars",),
                            version_key="exemplars_version"),
              StrategyStage("summarize", "after_evaluate", agents.summarize, workers=settings.workers))
    return Strategy(name="contextevolve", summary=SUMMARY, selector=selector_for(settings.selection, params),
                    context=AgentContext(agents), acceptance=Population(), merges=False, stages=stages,
                    item_ended=agents.item_ended)
