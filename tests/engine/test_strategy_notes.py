"""Failed candidates in ContextEvolve's buffer (the seam's item-ended hook) and the staleness of
strategy notes (plans, guidance) before the proposer sees them, on hand-made pools and a fake
run context (no pipeline)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from engine.items import Proposal, WorkItem
from engine.llm.sim.answer import answer
from engine.pool import Artifact, Pool
from engine.stages.strategy_stages import KindEnv, ended_from_item, ended_from_row, fresh_notes
from engine.staleness import make_policy
from engine.strategy import SearchParams, build
from engine.strategy.context_agents import ContextAgents, ContextEvolveSettings, navigator_messages
from engine.strategy.evolve_buffer import FailureLog, buffer_of, sample_by_category
from engine.strategy.protocols import EndedItem, StageView
from engine.strategy.revise import REVISER_MARKER, parse_revision


def _art(n: int, score: float, parent: int | None, notes: dict | None = None) -> Artifact:
    meta: dict = {"diff": f"-    r = 0.{n}\n+    r = 0.{n + 1}\n"}
    if notes:
        meta["notes"] = notes
    return Artifact(f"a{n:06d}", f"r = 0.{n}\n", (f"a{parent:06d}",) if parent is not None else (), n,
                    {"score": score}, status="seed" if parent is None else "confirmed", meta=meta)


def _pool(scores: list[tuple[float, int | None]], notes: dict[int, dict] | None = None) -> Pool:
    pool = Pool()
    for n, (score, parent) in enumerate(scores):
        pool.add(_art(n, score, parent, (notes or {}).get(n)))
    return pool


def _failed(item: str, parent: str, version: int, reason: str, outcome: str = "failed", merge: bool = False) -> EndedItem:
    return EndedItem(item, parent, version, outcome, reason, merge=merge, diff="-    r = 0.1\n+    r = 0.1 ((:\n")


@dataclass
class FakeEnv:
    archive: Pool
    replies: list[str | None] = field(default_factory=list)
    asked: list[tuple[str, list[dict]]] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    description: str = "Pack circles."

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        self.asked.append((stage, messages))
        return self.replies.pop(0) if self.replies else None


# -- A: failed candidates ----------------------------------------------------------------------
def test_only_failed_candidates_enter_the_log_once_each_in_version_order() -> None:
    log = FailureLog()
    log.add(_failed("i7", "a000001", 5, "patch failed: SEARCH text not found"))
    log.add(_failed("i3", "a000001", 2, "evaluation failed: timeout"))
    log.add(_failed("i3", "a000001", 2, "evaluation failed: timeout"))  # told again on resume
    log.add(_failed("i4", "a000001", 2, "LLM error: timeout"))  # the call failed: no candidate
    log.add(_failed("i5", "a000001", 2, "truncated (finish_reason=length)"))
    log.add(_failed("i6", "a000001", 2, "gap 3 > max_gap 2", outcome="discarded_stale"))
    log.add(_failed("i8", "a000001", 2, "evaluation failed: crash", merge=True))
    assert [(e.item_id, e.reason) for e in log.items()] == [("i3", "evaluation failed: timeout"),
                                                           ("i7", "patch failed: SEARCH text not found")]


def test_failed_candidates_reach_the_navigator_and_are_always_sampled() -> None:
    pool = _pool([(0.5, None), (0.6, 0), (0.4, 0), (0.7, 1)])
    agents = ContextAgents(ContextEvolveSettings(guidance_refresh=0, navigator_samples=3))
    agents.item_ended(_failed("i0009", "a000001", 2, "patch failed: SEARCH text not found"))
    transitions = agents.transitions(buffer_of(pool))
    assert [t.category for t in transitions].count("failed") == 1
    for seed in range(20):  # a failure (and a decline) always among the sample
        picked = sample_by_category(transitions, 3, ContextEvolveSettings().weights, random.Random(seed))
        assert {"failed", "decline"} <= {t.category for t in picked}
    env = FakeEnv(pool, replies=["Avoid edits that break the syntax."])
    out = asyncio.run(agents.navigate(StageView("i1", pool.get("a000003"), 3, {}), env))
    assert out == {"guidance": "Avoid edits that break the syntax.", "guidance_version": "3"}
    user = env.asked[0][1][1]["content"]
    assert "- [failed] a000001 -> i0009: score 0.6 -> not scored (patch failed: SEARCH text not found)" in user
    assert "after: (failed) - r = 0.1 | + r = 0.1 ((:" in user


def test_a_buffer_with_only_failures_still_guides_and_the_simulator_names_them() -> None:
    pool = _pool([(0.5, None)])
    agents = ContextAgents(ContextEvolveSettings(guidance_refresh=0))
    agents.item_ended(_failed("i0002", "a000000", 1, "evaluation failed: the evaluator crashed"))
    sample = agents.transitions(buffer_of(pool))
    reply = answer(navigator_messages("Pack circles.", "", sample), "navigate", random.Random(0))
    assert "0 improved" in reply and "1 failed before scoring" in reply
    assert "Recent failures (evaluation failed)" in reply


def test_a_live_item_and_its_stored_row_tell_the_strategy_the_same() -> None:
    item = WorkItem(item_id="i0004", created_version=3, parent_id="a000001", minibatch=[], stage="validate",
                    created_at=1.0, notes={"guidance": "g"},
                    proposal=Proposal(child="r = 0.2 ((:\n", diff="-r\n+r ((:"))
    item.end("failed", "filter syntax: invalid syntax")
    row = {"item_id": "i0004", "created_version": 3, "parent_artifact_id": "a000001", "stage": "validate",
           "created_at": 1.0, "outcome": "failed", "error": "filter syntax: invalid syntax",
           "payload": {k: v for k, v in item.to_payload().items() if k != "outcome"}}
    live, stored = ended_from_item(item), ended_from_row(row)
    assert live == stored and live.child == "r = 0.2 ((:\n" and live.notes == {"guidance": "g"}


def test_contextevolve_listens_for_ended_items_and_loongflow_does_not() -> None:
    assert build("contextevolve", "program", SearchParams()).item_ended is not None
    assert build("loongflow", "program", SearchParams()).item_ended is None


# -- B: stale notes ------------------------------------------------------------------------------
@dataclass
class Reply:
    text: str
    finish_reason: str = "stop"


class FakeLLM:
    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.stages: list[str] = []
        self.messages: list[list[dict]] = []

    async def chat(self, messages, stage, shrink=None):
        self.stages.append(stage)
        self.messages.append(messages)
        return Reply(self.replies.pop(0))


def _ctx(pool: Pool, policy: str, max_gap: int, replies: list[str]) -> SimpleNamespace:
    return SimpleNamespace(pool=pool, rng=random.Random(0), task=SimpleNamespace(description="Pack circles."),
                           policy=make_policy(policy, max_gap), staleness_counts=Counter(),
                           reflection_llm=FakeLLM(replies))


def _planned(pool: Pool, version: int) -> WorkItem:
    return WorkItem(item_id="i0009", created_version=version, parent_id="a000001", minibatch=[], stage="propose",
                    created_at=0.0, notes={"plan": "1. Raise r (now 0.1) by about 10%.", "plan_version": str(version)})


LOONGFLOW = build("loongflow", "program", SearchParams()).stages


@pytest.mark.parametrize("policy, max_gap, replies, action, stages, plan", [
    ("full", 0, [], "kept", [], "1. Raise r (now 0.1) by about 10%."),
    ("guarded", 1, ["PLAN: 1. Lower r (now 0.3) a little."], "redone", ["plan"], "1. Lower r (now 0.3) a little."),
    ("reflective", 0, ["REVISED: 1. Lower r (now 0.1) by about 10%."], "revised", ["plan_revise"],
     "1. Lower r (now 0.1) by about 10%."),
    ("reflective", 0, ["KEEP"], "revised", ["plan_revise"], "1. Raise r (now 0.1) by about 10%."),
    ("reflective", 0, [""], "dropped", ["plan_revise"], None),
])
def test_a_stale_plan_goes_through_the_policy(policy, max_gap, replies, action, stages, plan) -> None:
    pool = _pool([(0.5, None), (0.6, 0), (0.4, 1), (0.3, 1)], notes={2: {"summary": "raising r made it worse"}})
    ctx = _ctx(pool, policy, max_gap, replies)
    item = _planned(pool, 2)  # two versions behind
    asyncio.run(fresh_notes(LOONGFLOW, item, KindEnv(ctx, build("loongflow", "program", SearchParams())), None,
                            lambda _i: None))
    notes = item.notes
    assert notes.get("plan") == plan and ctx.reflection_llm.stages == stages
    assert ctx.staleness_counts == Counter({f"note_{action}": 1})
    if plan is not None and action != "kept":
        assert notes["plan_version"] == str(pool.version)  # now made against the current pool
    if action in ("revised", "dropped"):
        user = ctx.reflection_llm.messages[0][1]["content"]
        assert REVISER_MARKER in ctx.reflection_llm.messages[0][0]["content"]
        assert "made at pool version 2, now 4" in user and "a000002 from a000001" in user
        assert "raising r made it worse" in user and "\n- a000001 " not in user  # only changes since v2


def test_a_fresh_note_or_none_is_left_alone() -> None:
    pool = _pool([(0.5, None), (0.6, 0)])
    ctx = _ctx(pool, "guarded", 0, [])
    env = KindEnv(ctx, build("loongflow", "program", SearchParams()))
    fresh = _planned(pool, pool.version)
    bare = WorkItem(item_id="i1", created_version=0, parent_id="a000001", minibatch=[], stage="propose",
                    created_at=0.0, notes={"plan_fallback": "no plan"})
    for item in (fresh, bare):
        before = dict(item.notes)
        asyncio.run(fresh_notes(LOONGFLOW, item, env, None, lambda _i: None))
        assert item.notes == before
    assert ctx.reflection_llm.stages == [] and not ctx.staleness_counts


def test_stale_guidance_is_revised_once_per_version_and_a_redo_never_reuses_shared_guidance() -> None:
    pool = _pool([(0.5, None), (0.6, 0), (0.4, 0), (0.7, 1)])
    agents = ContextAgents(ContextEvolveSettings(guidance_refresh=10))
    old = {"guidance": "Directions that helped: raise r.", "guidance_version": "1"}
    env = FakeEnv(pool, replies=["REVISED: Directions that helped: lower r.", "fresh guidance here"])
    view = StageView("i5", pool.get("a000003"), 1, old)
    first = asyncio.run(agents.revise_guidance(view, env))
    again = asyncio.run(agents.revise_guidance(StageView("i6", pool.get("a000003"), 1, old), env))
    assert first == again == {"guidance": "Directions that helped: lower r.", "guidance_version": "4"}
    assert [s for s, _ in env.asked] == ["navigate_revise"]  # the second item reuses the revision
    shared = asyncio.run(agents.navigate(StageView("i7", pool.get("a000003"), 4, {}), env))
    assert shared["guidance"] == "Directions that helped: lower r." and len(env.asked) == 1
    redo = asyncio.run(agents.navigate(StageView("i7", pool.get("a000003"), 4, {}, refresh=True), env))
    assert redo == {"guidance": "fresh guidance here", "guidance_version": "4"} and env.asked[-1][0] == "navigate"


@pytest.mark.parametrize("reply, expected", [(None, None), ("  ", None), ("KEEP", "old"), ("keep: still holds", "old"),
                                             ("REVISED: new plan", "new plan"), ("**REVISED:**\nnew", "new"),
                                             ("just a new plan", "just a new plan")])
def test_revisions_are_parsed_and_failures_never_keep_the_note(reply, expected) -> None:
    assert parse_revision(reply, "old") == expected


def test_failed_candidates_reach_the_sampler_but_are_never_picked() -> None:
    pool = _pool([(0.5, None), (0.6, 0), (0.4, 0), (0.7, 1), (0.55, 1), (0.65, 3)])
    agents = ContextAgents(ContextEvolveSettings(exemplars=2))
    agents.item_ended(_failed("i0009", "a000003", 4, "evaluation failed: timeout"))
    env = FakeEnv(pool, replies=["EXEMPLARS: i0009, a000003"])
    out = asyncio.run(agents.sample(StageView("i1", pool.get("a000005"), 6, {}), env))
    user = env.asked[0][1][1]["content"]
    assert "## Recent failed candidates (not selectable)\n- i0009 (failed, from a000003): evaluation failed: timeout" in user
    assert out["exemplars"].startswith("- a000003") and "i0009" not in out["exemplars"]
    assert agents.stats.unknown_ids == 1
    reply = answer(env.asked[0][1], "sample", random.Random(0))  # the simulator picks candidates only
    assert "i0009" not in reply


CONTEXTEVOLVE = build("contextevolve", "program", SearchParams())


@pytest.mark.parametrize("policy, max_gap, action", [("full", 0, "kept"), ("guarded", 1, "redone"),
                                                      ("reflective", 0, "redone")])
def test_a_stale_exemplar_choice_is_made_again_against_the_current_pool(policy, max_gap, action) -> None:
    """Exemplar choices carry the pool version they were made from (issue 13 item 6); a stale
    one is picked afresh (no LLM repair: picking again is the repair), full keeps it."""
    pool = _pool([(0.5, None), (0.6, 0), (0.4, 1), (0.7, 1)])
    ctx = _ctx(pool, policy, max_gap, [])
    item = WorkItem(item_id="i0009", created_version=1, parent_id="a000001", minibatch=[], stage="propose",
                    created_at=0.0, notes={"exemplars": "an old pick", "exemplars_version": "1"})
    asyncio.run(fresh_notes(CONTEXTEVOLVE.stages, item, KindEnv(ctx, CONTEXTEVOLVE), None, lambda _i: None))
    notes = item.notes
    assert ctx.staleness_counts == Counter({f"note_{action}": 1})
    if action == "kept":
        assert notes == {"exemplars": "an old pick", "exemplars_version": "1"}
    else:
        assert notes["exemplars_version"] == str(pool.version) and notes["exemplars"] != "an old pick"
        assert "a000003" in notes["exemplars"]  # an artifact the old pick could not know
    assert ctx.reflection_llm.stages == []  # three candidates for three exemplars: no call needed
