"""The strategy seam: the registry, the parts' contracts, and selection tags reaching the archive."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pytest

from engine.pool import Artifact, Pool
from engine.strategy import SearchParams, UnknownStrategy, build, entries
from engine.strategy.parts import ParentGate, ParetoSelector, Population, TopAndDiverse, TournamentSelector
from engine.strategy.protocols import Evidence, Pick, StageView
from engine.strategy.registry import register
from tests.engine.fakes import completion, harness  # noqa: F401  (harness is a fixture)


def _pool(scores: list[float]) -> Pool:
    pool = Pool()
    for n, score in enumerate(scores):
        pool.add(Artifact(f"a{n:06d}", f"text {n}", ("a000000",) if n else (), 0, {"v0": score, "v1": score / 2},
                          status="seed" if n == 0 else "confirmed"))
    return pool


def test_the_registry_names_both_shipped_strategies_and_refuses_unknown_and_duplicate_names() -> None:
    assert {e.name for e in entries()} >= {"gepa", "openevolve"}
    assert build(None, "prompt", SearchParams()).name == "gepa"
    assert build(None, "program", SearchParams()).name == "openevolve"
    with pytest.raises(UnknownStrategy, match="unknown strategy 'nope'; strategies are .*gepa"):
        build("nope", "prompt", SearchParams())
    with pytest.raises(ValueError, match="registered twice"):
        register("gepa", "again")(lambda params: build("gepa", "prompt", params))


def test_the_parent_gate_needs_strict_improvement_except_for_merges() -> None:
    gate = ParentGate()
    def one(score: float) -> Evidence:
        return Evidence({"ex": score})

    assert gate.verdict(one(2.0), one(1.0), tie_passes=False) is None
    assert gate.verdict(one(1.0), one(1.0), tie_passes=False) == "1.00 <= parent 1.00"
    assert gate.verdict(one(1.0), one(1.0), tie_passes=True) is None
    assert gate.verdict(one(0.5), one(1.0), tie_passes=True) == "0.50 < parent 1.00"
    assert Population().verdict(one(0.0), one(1.0), tie_passes=False) is None and not Population().gated


def test_pareto_on_one_score_picks_among_the_top_scorers() -> None:
    pool = _pool([0.1, 0.9, 0.5, 0.9])
    picks = {ParetoSelector().pick(pool, ("v0",), random.Random(s)).parent_id for s in range(40)}
    # GEPA drops dominated candidates: of two tied top scorers (the same fronts) one survives.
    assert len(picks) == 1 and picks <= {"a000001", "a000003"}


def test_tournament_and_inspirations_follow_their_settings() -> None:
    pool = _pool([0.1, 0.9, 0.5, 0.7, 0.3])
    never_explore = TournamentSelector(tournament_size=5, elite_size=2, explore_prob=0.0)
    assert {never_explore.pick(pool, (), random.Random(s)).parent_id for s in range(20)} == {"a000001"}
    weights = never_explore.merge_weights(pool, ())
    assert weights == {"a000001": 2, "a000003": 1}
    seen = TopAndDiverse(num_top=2, num_diverse=1).inspirations(pool, pool.get("a000001"), random.Random(0))
    assert [a.artifact_id for a in seen[:2]] == ["a000003", "a000002"] and len(seen) == 3
    assert "a000001" not in {a.artifact_id for a in seen}


@dataclass(frozen=True)
class IslandTagger:
    """A selector that picks the best artifact and says which (pretend) island it came from."""

    name: str = "test tagger"

    def pick(self, archive, instances, rng) -> Pick:
        best = archive.best()
        return Pick(best.artifact_id, {"island": 2, "why": "best"})

    def merge_weights(self, archive, instances):
        return {}


async def test_selection_tags_travel_with_the_item_into_the_committed_childs_meta(harness) -> None:  # noqa: F811
    run = await harness.create(budget={"max_proposals": 3})
    handlers = run.orchestrator.handlers
    handlers.strategy = replace(handlers.strategy, selector=IslandTagger())
    result = await harness.run_to_end(run, timeout=10)
    assert result.status == "completed"
    items = await harness.rows("items", run.ctx.run_id)
    assert items and all(i["payload"]["selection"] == {"island": 2, "why": "best"} for i in items)
    children = [a for a in run.ctx.pool.artifacts() if a.status != "seed"]
    assert children and all(dict(a.meta["selection"]) == {"island": 2, "why": "best"} for a in children)


async def _plan(view: StageView, env) -> dict[str, str]:
    reply = await env.ask([{"role": "system", "content": "You plan."},
                           {"role": "user", "content": f"Plan an improvement of {view.parent.artifact_id}."}], "plan")
    return {"plan": reply if reply is not None else "(no plan: the planner failed)", "plan_source": "the test planner"}


async def _summarize(view: StageView, env) -> dict[str, str]:
    assert view.child is not None and view.notes.get("plan")
    return {"summary": f"{view.parent.artifact_id} -> {view.child_score:.2f} following: {view.notes['plan']}"}


async def test_a_strategys_own_stages_run_as_pipeline_stages_and_guide_the_proposer(harness, monkeypatch) -> None:  # noqa: F811
    import engine.run.runner as runner_mod
    from engine.strategy.protocols import StrategyStage

    base = build("gepa", "prompt", SearchParams())
    planned = replace(base, name="planned", stages=(StrategyStage("plan", "before_propose", _plan, workers=3,
                                                                  guides=("plan",)),
                                                    StrategyStage("summarize", "after_evaluate", _summarize, calls=0)))
    monkeypatch.setattr(runner_mod, "strategy_for", lambda ctx: planned)
    fake = harness.fake
    fake.override = lambda req: completion("PLAN: add the missing keyword") if req.stage == "plan" else None
    # Mode named: the strategy comes from the patched strategy_for, not the config, so a
    # kind's default mode could not know it has no gate.
    run = await harness.create(pipeline={"mode": "async"}, budget={"max_proposals": 3})
    orch = run.orchestrator
    assert orch.spec.names == ("rollout", "plan", "propose", "evaluate", "summarize", "update")
    assert orch.stages["plan"].target_workers == 3 and "plan" in orch.spec.scalable
    assert run.orchestrator.handlers.estimate()["llm_calls"] == 2 * 3 + 1 + 4 + 1  # + the planner's call
    result = await harness.run_to_end(run, timeout=10)
    assert result.status == "completed"
    proposals = [r for r in fake.requests if r.stage == "propose"]
    assert proposals and all("## Guidance from the search strategy\n### plan\n> PLAN: add the missing keyword"
                             in r.user for r in proposals)
    assert not any("plan_source" in r.user for r in proposals)  # not a guiding key: kept, not shown
    children = [a for a in run.ctx.pool.artifacts() if a.status != "seed"]
    assert children
    for child in children:
        notes = dict(child.meta["notes"])
        assert notes["plan"] == "PLAN: add the missing keyword" and notes["plan_source"] == "the test planner"
        assert notes["summary"].endswith("following: PLAN: add the missing keyword")
    stages = {row["stage"] for row in await harness.rows("item_stages", run.ctx.run_id)}
    assert {"plan", "summarize"} <= stages


async def test_handlers_that_refuse_the_run_give_a_setup_error_and_release_everything(harness, monkeypatch) -> None:  # noqa: F811
    import engine.run.runner as runner_mod
    from engine.run.runner import SetupError

    def refuse(ctx, strategy=None):
        raise ValueError("strategy x cannot run here; use strategy y")

    monkeypatch.setattr(runner_mod, "build_handlers", refuse)
    with pytest.raises(SetupError, match="strategy x cannot run here; use strategy y"):
        await harness.create()
    assert not harness.db.exists()  # nothing half-made is left, and the store's writer has stopped
