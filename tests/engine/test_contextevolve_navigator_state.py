"""ContextEvolve's shared Navigator guidance is part of the run state: the strategy's context part
keeps it (KeepsState), a RunState round trip carries it, and a fresh strategy restored from it
shares the same guidance the original would (tests/e2e/test_resume_reproduces.py checks a whole
killed-and-resumed run)."""

from __future__ import annotations

from engine.pool import Artifact, Pool
from engine.run.state import RunState, part_states, restore_part_states, strategy_parts
from engine.strategy import build
from engine.strategy.evolve_buffer import SharedGuidance, buffer_of
from engine.strategy.protocols import SearchParams


def _strategy():
    return build("contextevolve", "program", SearchParams(options={"contextevolve": {"guidance_refresh": 4}}))


def _pool() -> Pool:
    pool = Pool()
    pool.add(Artifact("a000000", "x = 1\n", (), 0, {"score": 0.5}, status="seed"))
    return pool


def test_guidance_made_in_no_artifact_survives_a_state_round_trip() -> None:
    live = _strategy()
    agents = live.context.agents
    agents._made = SharedGuidance(3, "prefer denser packings near the border")
    parts = strategy_parts(live)
    assert "contextevolve.navigator" in {p.state_key for p in parts}
    stored = RunState.from_dict(RunState(strategy=part_states(parts)).to_dict()).strategy
    assert stored["contextevolve.navigator"] == {"guidance_version": 3, "guidance": "prefer denser packings near the border"}

    resumed = _strategy()
    assert resumed.context.agents.shared_guidance(buffer_of(_pool()), 5) is None  # fresh: nothing to share
    restore_part_states(strategy_parts(resumed), stored)
    buf = buffer_of(_pool())
    assert resumed.context.agents.shared_guidance(buf, 5) == agents.shared_guidance(buf, 5) == \
        SharedGuidance(3, "prefer denser packings near the border")
    assert resumed.context.agents.shared_guidance(buf, 7) is None  # past guidance_refresh, as live


def test_no_guidance_yet_stores_nothing_and_a_bad_entry_is_ignored() -> None:
    live = _strategy()
    assert part_states(strategy_parts(live))["contextevolve.navigator"] == {}
    resumed = _strategy()
    restore_part_states(strategy_parts(resumed), {"contextevolve.navigator": {"guidance": "", "guidance_version": "x"}})
    assert resumed.context.agents.navigator_state() == {}


class FakeEnv:
    """The services a strategy stage uses: the pool as archive and a counting LLM."""

    def __init__(self, pool: Pool, item: str) -> None:
        self.item = item
        """Whose draw the reply is (the simulator draws a reply per item, stage and request)."""
        self.archive = pool
        self.rng = None
        self.description = "pack circles"
        self.asked: list[str] = []

    async def ask(self, messages: list[dict], stage: str) -> str | None:
        self.asked.append(stage)
        return f"guidance for {self.item}: try a hexagonal layout"


async def test_a_restored_navigator_shares_the_guidance_a_failed_item_made() -> None:
    from engine.strategy.protocols import EndedItem, StageView

    pool = _pool()
    seed = pool.get("a000000")
    live = _strategy()
    # Item 2's candidate failed (no artifact carries its guidance); the failure is what the
    # Navigator learns from, so item 2 asks for guidance.
    failed = EndedItem(item_id="i000002", parent_id="a000000", created_version=1, outcome="failed",
                       reason="evaluation failed: IndexError", diff="-    n = 26\n+    n = 25\n", merge=False)
    live.item_ended(failed)
    env = FakeEnv(pool, "i000002")
    made = await live.context.agents.navigate(StageView("i000002", seed, 1, {}), env)
    assert env.asked == ["navigate"] and made["guidance_version"] == "1"

    stored = RunState.from_dict(RunState(strategy=part_states(strategy_parts(live))).to_dict()).strategy
    resumed, fresh = _strategy(), _strategy()
    restore_part_states(strategy_parts(resumed), stored)
    for s in (resumed, fresh):
        s.item_ended(failed)  # a resume replays the stored item rows
    after_live, after_resume, after_fresh = (FakeEnv(pool, "i000003") for _ in range(3))
    view = StageView("i000003", seed, 1, {})
    shared = await live.context.agents.navigate(view, after_live)
    assert await resumed.context.agents.navigate(view, after_resume) == shared == made
    assert after_live.asked == after_resume.asked == []  # item 3 shares item 2's guidance, no call
    # Without the saved state a resumed run would ask again and get other guidance.
    assert await fresh.context.agents.navigate(view, after_fresh) != shared and after_fresh.asked == ["navigate"]
