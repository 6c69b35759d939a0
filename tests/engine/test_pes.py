"""LoongFlow's Plan-Execute-Summarize stages (engine/strategy/pes.py): the planner's lineage, the
parsing of malformed answers, the pipeline order against staleness, and the simulator's agents."""

from __future__ import annotations

import random

import pytest

from engine.llm.sim import answer as sim_answer
from engine.llm.sim import pes_agents
from engine.pool import Artifact, Pool
from engine.strategy import SearchParams, build
from engine.strategy import pes
from engine.strategy.protocols import StageView
from tests.engine.fakes import completion, harness  # noqa: F401  (harness is a fixture)


def _chain(n: int) -> Pool:
    """a0 <- a1 <- ... <- a(n-1), each with a plan and a summary (but the seed)."""
    pool = Pool()
    for k in range(n):
        notes = {} if k == 0 else {"plan": f"plan {k}", "summary": f"summary {k}"}
        pool.add(Artifact(f"a{k}", f"x = {k}.5\n", (f"a{k - 1}",) if k else (), k, {"v": k / 10},
                          status="seed" if k == 0 else "confirmed", meta={"notes": notes}))
    return pool


class Env:
    def __init__(self, pool: Pool, replies: list[str | None]) -> None:
        self.archive = pool
        self.rng = random.Random(0)
        self.description = "Pack circles."
        self.replies = replies
        self.asked: list[tuple[list[dict], str]] = []

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        self.asked.append((messages, stage))
        return self.replies.pop(0)


def _view(pool: Pool, parent: str, **kw) -> StageView:
    return StageView(item_id="i1", parent=pool.get(parent), pool_version=pool.version, notes=kw.pop("notes", {}), **kw)


def test_the_lineage_is_bounded_oldest_first_and_stops_at_a_missing_ancestor() -> None:
    pool = _chain(6)
    env = Env(pool, [])
    gens = pes.lineage(_view(pool, "a5"), env, depth=4)
    assert [g.artifact_id for g in gens] == ["a2", "a3", "a4", "a5"]
    assert gens[-1].plan == "plan 5" and gens[-1].summary == "summary 5" and gens[0].score == pytest.approx(0.2)
    assert [g.artifact_id for g in pes.lineage(_view(pool, "a2"), env, depth=10)] == ["a0", "a1", "a2"]
    orphan = Artifact("b1", "t", ("gone",), 1, {"v": 0.1})  # its parent was removed from the pool
    assert [g.artifact_id for g in pes.lineage(StageView("i", orphan, 1, {}), env, 4)] == ["b1"]


def test_the_planner_prompt_carries_the_marker_the_lineage_and_a_stable_prefix() -> None:
    pool = _chain(4)
    msgs = pes.planner_messages(_view(pool, "a3"), "Pack circles.", pes.lineage(_view(pool, "a3"), Env(pool, []), 4))
    assert msgs[0]["content"].startswith(pes.PLANNER_MARKER) and pes.PLANNER_MARKER == pes_agents.PLANNER_MARKER
    user = msgs[1]["content"]
    assert user.index("a1 score") < user.index("a2 score") < user.index("a3 score")  # oldest first
    assert "plan: plan 2" in user and "summary: summary 3" in user and "x = 3.5" in user
    assert pes.SUMMARIZER_MARKER == pes_agents.SUMMARIZER_MARKER


@pytest.mark.parametrize("reply, why", [
    (None, "the call failed"),
    ("", "empty answer"),
    ("   \n", "empty answer"),
    ("```python\nx = 1\n```", "no prose outside code"),
    ("PLAN: ok", "too short (1 words)"),
])
def test_malformed_answers_are_refused_with_a_reason(reply, why) -> None:
    assert pes.parse_note(reply, "plan") == (None, why)


def test_usable_answers_are_taken_after_their_label_without_code_and_capped() -> None:
    assert pes.parse_note("Thinking.\nPLAN:\n1. Raise r by 10%.", "plan") == ("1. Raise r by 10%.", "")
    assert pes.parse_note("**Summary**: raising r helped a lot", "summary") == ("raising r helped a lot", "")
    assert pes.parse_note("Lower k a bit.\n```py\nk = 1\n```", "plan") == ("Lower k a bit.", "")
    long, _ = pes.parse_note("PLAN: " + "word " * 1000, "plan")
    assert long is not None and len(long) == pes.NOTE_CAP and long.endswith("...")


async def test_the_stages_fall_back_on_a_malformed_answer_and_summarize_intent_against_result() -> None:
    pool = _chain(3)
    plan_stage, summary_stage = pes.pes_stages(depth=2)
    assert (plan_stage.name, plan_stage.when, summary_stage.when) == ("plan", "before_propose", "after_evaluate")
    env = Env(pool, ["", "PLAN: raise x by a tenth", None, "SUMMARY: raising x helped, continue"])
    assert await plan_stage.run(_view(pool, "a2"), env) == {"plan_fallback": "no plan (empty answer); plain proposal"}
    # The plan carries the pool version it was made from (its staleness is judged by it).
    assert await plan_stage.run(_view(pool, "a2"), env) == {"plan": "raise x by a tenth",
                                                             "plan_version": str(pool.version)}
    done = _view(pool, "a2", notes={"plan": "raise x by a tenth"}, child="x = 2.75\n", child_score=0.5)
    assert await summary_stage.run(done, env) == {"summary_fallback": "no summary (the call failed)"}
    assert await summary_stage.run(done, env) == {"summary": "raising x helped, continue"}
    user = env.asked[-1][0][1]["content"]
    assert "score 0.2 -> 0.5 (improved)" in user and "-x = 2.5\n+x = 2.75" in user and "raise x by a tenth" in user


def test_loongflow_has_the_pes_stages_unless_switched_off() -> None:
    on = build("loongflow", "program", SearchParams(options={"loongflow": {"planner_workers": 2, "summarizer_workers": 3}}))
    assert [(s.name, s.workers) for s in on.stages] == [("plan", 2), ("summarize", 3)]
    assert build("loongflow", "program", SearchParams(options={"loongflow": {"pes": False}})).stages == ()


async def test_the_plan_runs_before_the_staleness_checked_propose_and_reaches_the_child(harness, monkeypatch) -> None:  # noqa: F811
    import engine.run.runner as runner_mod

    monkeypatch.setattr(runner_mod, "strategy_for", lambda ctx: build("loongflow", "prompt", SearchParams()))
    replies = {"plan": "PLAN: name the keyword explicitly", "summarize": "SUMMARY: naming the keyword helped"}
    harness.fake.override = lambda req: completion(replies[req.stage]) if req.stage in replies else None
    run = await harness.create(pipeline={"mode": "async"}, budget={"max_proposals": 3})
    spec = run.orchestrator.spec
    names = spec.names
    # The plan is made against the item's pool version; the staleness check that follows it
    # (propose's) therefore judges plan and proposal together.
    assert names.index("plan") < names.index("propose") < names.index("summarize")
    assert "propose" in spec.checked and "plan" not in spec.checked
    result = await harness.run_to_end(run, timeout=10)
    assert result.status == "completed"
    children = [a for a in run.ctx.pool.artifacts() if a.status != "seed"]
    assert children and all({k: v for k, v in dict(a.meta["notes"]).items() if k != "plan_version"}
                            == {"plan": "name the keyword explicitly", "summary": "naming the keyword helped"}
                            and dict(a.meta["notes"])["plan_version"].isdigit() for a in children)


def _ask(system: str, user: str, stage: str) -> str:
    return sim_answer.answer([{"role": "system", "content": system}, {"role": "user", "content": user}],
                             stage, random.Random(0))


def test_the_simulator_plans_from_the_parents_constants_and_avoids_a_reported_pitfall() -> None:
    pool = Pool()
    pool.add(Artifact("p", "n = 26\nspread = 0.25\n", (), 0, {"v": 0.5}, status="seed"))
    view = StageView("i", pool.get("p"), 0, {})
    msgs = pes.planner_messages(view, "Pack.", pes.lineage(view, Env(pool, []), 4))
    reply = _ask(msgs[0]["content"], msgs[1]["content"], "plan")
    plan, why = pes.parse_note(reply, "plan")
    assert plan is not None and why == "" and ("n (now 26)" in plan or "spread (now 0.25)" in plan)
    name = "n" if "n (now 26)" in plan else "spread"
    first = "raising" if plan.startswith("1. Raise") else "lowering"
    avoided = _ask(msgs[0]["content"], msgs[1]["content"] + f"\n   summary: {first} {name} made it worse", "plan")
    assert ("Lower" if first == "raising" else "Raise") + f" {name}" in avoided
    assert reply == _ask(msgs[0]["content"], msgs[1]["content"], "plan")  # deterministic


def test_the_simulator_summarizes_by_the_score_change() -> None:
    pool = Pool()
    pool.add(Artifact("p", "n = 26\n", (), 0, {"v": 0.5}, status="seed"))
    for score, word in ((0.7, "improved"), (0.1, "made it worse"), (0.5, "unchanged")):
        view = StageView("i", pool.get("p"), 0, {"plan": "1. Raise n (now 26) by about 10%."},
                         child="n = 29\n", child_score=score)
        msgs = pes.summarizer_messages(view, "Pack.")
        summary, _ = pes.parse_note(_ask(msgs[0]["content"], msgs[1]["content"], "summarize"), "summary")
        assert summary is not None and summary.startswith("raising n") and word in summary
