"""Failed candidates reach ContextEvolve's log through the orchestrator's item-ended hook while a
run works, and a resumed run rebuilds the same log from the stored item rows (the fake LLM's
keyword task; every third proposal is unparsable, so its item fails without a score)."""

from __future__ import annotations

import engine.run.runner as runner_mod
from engine.strategy import SearchParams, build
from engine.strategy.evolve_buffer import buffer_of
from tests.engine.fakes import completion, harness  # noqa: F401  (harness is a fixture)


def _log(run):
    agents = run.strategy.item_ended.__self__  # ContextAgents.item_ended, a bound method
    return agents, agents.failures


async def test_failed_candidates_are_told_live_and_rebuilt_exactly_on_resume(harness, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setattr(runner_mod, "strategy_for", lambda ctx: build("contextevolve", "prompt", SearchParams()))
    proposals = []

    def override(req):
        if req.stage != "propose":
            return None
        proposals.append(req.item_id)
        return completion("I would rather not write a block this time.") if len(proposals) % 3 == 0 else None

    harness.fake.override = override
    run = await harness.create(pipeline={"mode": "async"}, budget={"max_proposals": 9})
    result = await harness.run_to_end(run, timeout=20)
    assert result.status == "completed"
    agents, live = _log(run)
    told = [(e.item_id, e.reason) for e in live.items()]
    assert len(told) == 3 and all(reason == "no parsable instructions block" for _, reason in told)
    rows = {r["item_id"]: r for r in await harness.rows("items", run.ctx.run_id)}
    assert {i for i, _ in told} == {i for i, r in rows.items() if r["outcome"] == "failed"}
    transitions = agents.transitions(buffer_of(run.ctx.pool))
    assert sorted(t.child_id for t in transitions if t.category == "failed") == sorted(i for i, _ in told)

    again = await harness.resume(run.ctx.run_id, {"max_proposals": 9})
    try:
        _, rebuilt = _log(again)
        assert len(rebuilt) == 0  # told nothing yet: the first strategy stage replays the rows
        await again.orchestrator.handlers.strategy_env.replay_ended()
        assert rebuilt.items() == live.items()
    finally:
        await again.close()
