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
