"""The control socket's gpu_slots command: what an attached view shows of a live run's GPU slots."""

from __future__ import annotations

from engine.run.runner import EngineRun
from evotui.control import apply_command


async def test_gpu_slots_reports_the_declared_devices_and_none_without_them(tmp_path) -> None:
    run = await EngineRun.create("circle_packing", [("test", {"evaluator": {"gpus": ["0", "1"], "evals_per_gpu": 2},
                                                              "budget": {"max_proposals": 1}})], tmp_path / "g.db")
    try:
        slots = apply_command(run, {"cmd": "gpu_slots"})
        assert slots["slots"] == 4 and slots["busy"] == 0, slots
    finally:
        await run.close()
    plain = await EngineRun.create("rules", [("test", {"budget": {"max_proposals": 1}})], tmp_path / "p.db")
    try:
        assert apply_command(plain, {"cmd": "gpu_slots"}) is None
    finally:
        await plain.close()
