"""ContextEvolve's context agents (engine/strategy/context_agents.py) on a hand-made pool: category
sampling, the summary chain, fallbacks, guidance sharing, the buffer rebuilt from the pool, and
the simulator's answers to the agents' prompts."""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict, dataclass, field

from engine.strategy.contextevolve import ContextEvolveOptions
from engine.llm.sim.answer import answer
from engine.pool import Artifact, Pool
from engine.strategy import SearchParams, build
from engine.strategy.context_agents import (NAVIGATOR_MARKER, SAMPLER_MARKER, SUMMARIZER_MARKER, ContextAgents,
                                            ContextEvolveSettings, sampler_candidates, sampler_messages)
from engine.strategy.evolve_buffer import EvolveBuffer, buffer_of, category, sample_by_category
from engine.strategy.protocols import StageView


def _art(n: int, score: float, parent: int | None, notes: dict | None = None) -> Artifact:
    meta = {"notes": notes} if notes else {}
    meta["diff"] = f"-    x = {n}\n+    x = {n + 1}\n"
    return Artifact(f"a{n:06d}", f"x = {n}\n", (f"a{parent:06d}",) if parent is not None else (), n, {"score": score},
                    status="seed" if parent is None else "confirmed", meta=meta)


def _pool(scores: list[tuple[float, int | None]], notes: dict[int, dict] | None = None) -> Pool:
    pool = Pool()
    for n, (score, parent) in enumerate(scores):
        pool.add(_art(n, score, parent, (notes or {}).get(n)))
    return pool


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


def _view(pool: Pool, parent: str, version: int, notes: dict | None = None, child: str | None = None,
          score: float | None = None, item: str = "i1") -> StageView:
    return StageView(item, pool.get(parent), version, notes or {}, child, score)


def _run(coro):
    return asyncio.run(coro)


# seed 0.5; children: up, down, equal, down, up
MIXED_POOL = [(0.5, None), (0.6, 0), (0.4, 0), (0.5, 0), (0.3, 1), (0.7, 1)]


def test_config_and_settings_agree_and_the_strategy_is_registered() -> None:
    assert ContextEvolveOptions().model_dump() == asdict(ContextEvolveSettings())
    strategy = build("contextevolve", "program", SearchParams())
    assert [st.name for st in strategy.stages] == ["navigate", "sample", "summarize"]
    islands = build("contextevolve", "program", SearchParams(options={"contextevolve": {"selection": "islands"}}))
    assert "island" in islands.selector.name
    assert "Pareto" in build("contextevolve", "prompt", SearchParams(options={"contextevolve": {"selection": "pareto"}})).selector.name


def test_categories_and_declines_are_always_sampled() -> None:
    assert category({"a": 1, "b": 1}, {"a": 2, "b": 1}) == "improvement"
    assert category({"a": 1, "b": 1}, {"a": 2, "b": 0}) == "mixed"
    assert category({"a": 1}, {"a": 1}) == "mixed"
    assert category({"a": 1}, {"a": 0.5}) == "decline"
    transitions = EvolveBuffer(_pool(MIXED_POOL).artifacts()).transitions()
    assert [t.category for t in transitions] == ["improvement", "decline", "mixed", "decline", "improvement"]
    no_declines = {"improvement": 1.0, "mixed": 1.0, "decline": 0.0}
    for seed in range(30):
        sample = sample_by_category(transitions, 1, no_declines, random.Random(seed))
        assert [t.category for t in sample] == ["decline"]  # even with weight 0 and one slot
        sample = sample_by_category(transitions, 3, {"improvement": 1.0, "mixed": 0.0, "decline": 0.0}, random.Random(seed))
        assert sorted(t.category for t in sample) == ["decline", "improvement", "improvement"]
    assert len(sample_by_category(transitions, 10, no_declines, random.Random(0))) == 5  # no repeats


def test_the_buffer_rebuilt_from_the_pool_equals_the_incremental_one() -> None:
    pool = Pool()
    live = buffer_of(pool)  # built empty, then told every commit
    for n, (score, parent) in enumerate(MIXED_POOL):
        pool.add(_art(n, score, parent, {"summary": f"s{n}", "guidance": f"g{n}", "guidance_version": str(n)}))
    rebuilt = EvolveBuffer(pool.artifacts())
    assert live.transitions() == rebuilt.transitions() and len(rebuilt.transitions()) == 5
    assert live.guidance == rebuilt.guidance and rebuilt.guidance.version == 5
    assert rebuilt.transitions()[-1].parent_summary == "s1"


def test_the_summary_chains_from_the_parent_summary_and_falls_back_on_a_failed_call() -> None:
    pool = _pool([(0.5, None), (0.6, 0)], notes={1: {"summary": "NEW: hexagonal rows.\nPRESERVES: grid"}})
    agents = ContextAgents(ContextEvolveSettings())
    env = FakeEnv(pool, replies=["NEW: tighter rows.\nPRESERVES: hexagonal rows", None, "   "])
    notes = _run(agents.summarize(_view(pool, "a000001", 1, child="x = 2\n", score=0.7), env))
    assert notes == {"summary": "NEW: tighter rows.\nPRESERVES: hexagonal rows"}
    system, user = (m["content"] for m in env.asked[0][1])
    assert SUMMARIZER_MARKER in system and "PRESERVES" in system
    assert "## Parent summary\nNEW: hexagonal rows." in user and "+x = 2" in user
    failed = _run(agents.summarize(_view(pool, "a000000", 1, child="x = 2\n", score=0.7), env))
    assert failed["summary"].startswith("NEW: 1 lines added, 1 removed") and "initial" in failed["summary"]
    assert "(none: the parent is the initial candidate)" in env.asked[1][1][1]["content"]
    empty = _run(agents.summarize(_view(pool, "a000001", 1, child="x = 3\n", score=0.7), env))
    assert "PRESERVES: NEW: hexagonal rows." in empty["summary"]
    assert agents.stats.fallbacks["summarizer"] == 2 and agents.stats.calls["summarizer"] == 3


def test_guidance_is_shared_within_the_refresh_interval_and_survives_a_restart() -> None:
    pool = _pool(MIXED_POOL)
    agents = ContextAgents(ContextEvolveSettings(guidance_refresh=3))
    env = FakeEnv(pool, replies=["Structure helped; tuning hurt.", "Explore new layouts."])
    first = _run(agents.navigate(_view(pool, "a000005", 10), env))
    assert first == {"guidance": "Structure helped; tuning hurt.", "guidance_version": "10"}
    assert NAVIGATOR_MARKER in env.asked[0][1][0]["content"] and "[decline]" in env.asked[0][1][1]["content"]
    shared = _run(agents.navigate(_view(pool, "a000005", 12, item="i2"), env))
    assert shared == first and len(env.asked) == 1 and agents.stats.shared_guidance == 1
    fresh = _run(agents.navigate(_view(pool, "a000005", 13, item="i3"), env))
    assert fresh == {"guidance": "Explore new layouts.", "guidance_version": "13"} and len(env.asked) == 2
    # A new process (resume) finds the newest guidance in the committed children's notes.
    pool.add(_art(6, 0.8, 5, {"guidance": "Explore new layouts.", "guidance_version": "13"}))
    restarted = ContextAgents(ContextEvolveSettings(guidance_refresh=3))
    env2 = FakeEnv(pool)
    assert _run(restarted.navigate(_view(pool, "a000006", 14), env2)) == fresh and not env2.asked
    # Every item asks with refresh 0; a failed call leaves the plain context.
    every = ContextAgents(ContextEvolveSettings(guidance_refresh=0))
    assert _run(every.navigate(_view(pool, "a000006", 14), env2)) == {} and len(env2.asked) == 1
    assert every.stats.fallbacks["navigator"] == 1
    # Only the seed: nothing to learn from, no call.
    seed_only = _pool([(0.5, None)])
    env4 = FakeEnv(seed_only)
    assert _run(ContextAgents(ContextEvolveSettings()).navigate(_view(seed_only, "a000000", 0), env4)) == {}
    assert not env4.asked


def test_the_sampler_drops_unknown_ids_and_falls_back_on_malformed_answers() -> None:
    pool = _pool(MIXED_POOL)
    agents = ContextAgents(ContextEvolveSettings(exemplars=2))
    env = FakeEnv(pool, replies=["EXEMPLARS: a000004, a999999, zz12, a000002", "I cannot decide.", None])
    notes = _run(agents.sample(_view(pool, "a000005", 5, notes={"guidance": "go wide"}), env))
    assert [line.split()[1] for line in notes["exemplars"].splitlines() if line.startswith("- ")] == ["a000004", "a000002"]
    assert agents.stats.unknown_ids == 2 and agents.stats.fallbacks["sampler"] == 0
    system, user = (m["content"] for m in env.asked[0][1])
    assert SAMPLER_MARKER in system and "## Guidance\ngo wide" in user and "a000005 |" not in user
    fallback = [_run(agents.sample(_view(pool, "a000005", 5, item=f"i{n}"), env)) for n in range(2)]
    assert fallback[0] == fallback[1] and agents.stats.fallbacks["sampler"] == 2
    # Deterministic pick: the best other artifact (also the newest improvement), then the lowest scorer.
    assert [line.split()[1] for line in fallback[0]["exemplars"].splitlines() if line.startswith("- ")] == ["a000001", "a000004"]
    # Few enough candidates: all of them, no call.
    small = _pool([(0.5, None), (0.6, 0)])
    env3 = FakeEnv(small)
    assert _run(agents.sample(_view(small, "a000001", 1), env3))["exemplars"].startswith("- a000000") and not env3.asked


def test_the_simulator_answers_the_agents_from_their_prompts() -> None:
    pool = _pool(MIXED_POOL, notes={1: {"summary": "NEW: retunes constants (now 2).\nPRESERVES: the grid."}})
    agents = ContextAgents(ContextEvolveSettings(exemplars=2, guidance_refresh=0))

    class SimEnv(FakeEnv):
        async def ask(self, messages, stage):
            self.asked.append((stage, messages))
            return answer(messages, stage, random.Random(0))

    env = SimEnv(pool)
    summary = _run(agents.summarize(_view(pool, "a000001", 5, child="def f():\n    return 1\n", score=0.9), env))
    assert summary["summary"] == "NEW: adds f.\nPRESERVES: retunes constants (now 2)."
    guidance = _run(agents.navigate(_view(pool, "a000005", 5), env))["guidance"]
    assert guidance.startswith("Of ") and "declined" in guidance and "def " not in guidance
    candidates = {a.artifact_id for a in sampler_candidates(buffer_of(pool), "a000005", 24)}
    picked = _run(agents.sample(_view(pool, "a000005", 5), env))["exemplars"]
    ids = [line.split()[1] for line in picked.splitlines() if line.startswith("- ")]
    assert len(ids) == 2 and set(ids) <= candidates and agents.stats.unknown_ids == 0
    assert ids == ["a000001", "a000004"]  # the best other, then the lowest scorer
    assert "Pick up to 2." in sampler_messages(pool.get("a000005"), "", [pool.get("a000001")], 2)[1]["content"]
