"""Steering a program task (circle_packing, simulated backend): the guidance reaches the program
proposer's stored requests, and re-evaluation runs the task's held-out evaluator in the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from engine.steering import SteerError
from engine.steering import live as steering
from engine.store.store import read_only_open

LAYERS = [("test", {"budget": {"max_proposals": 3}, "sim": {"time_scale": 2000.0}, "pipeline": {"mode": "async"}})]
TEXT = "Try a hexagonal arrangement before tuning radii"


async def test_program_guidance_and_heldout_reevaluation(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = await EngineRun.create("circle_packing", LAYERS, db)
    steering.take(run.ctx, {"act": "guide", "text": TEXT, "count": 2}, "python")
    result = await run.run()
    assert result.status == "completed"
    store = await read_only_open(db)
    try:
        proposals = {c["item_id"]: c["messages"][-1]["content"] async for c in store.iter_llm_calls(run.ctx.run_id)
                     if c["stage"] == "propose"}
    finally:
        await store.close()
    steered = [i for i, text in proposals.items() if "## Guidance from the operator" in text and f"> {TEXT}" in text]
    assert len(proposals) >= 3 and len(steered) == 2
    # The program contract holds: the parent is still the fenced block under "## Current program".
    assert all(text.index("## Current program") < text.index("## Guidance from the operator")
               for i, text in proposals.items() if i in steered)

    again = await EngineRun.resume(db, run.ctx.run_id, {"max_proposals": 3}, {})
    try:
        best = result.summary["best_id"]
        with pytest.raises(SteerError, match="a program task is scored by its evaluator, not on examples"):
            steering.take(again.ctx, {"act": "reeval", "target": best, "examples": 2}, "python")
        request, done = await steering.take_and_finish(again.ctx, {"act": "reeval", "target": best, "heldout": True},
                                                       "python")
        assert done.detail["split"] == "heldout" and done.detail["n"] == 1
        assert done.detail["mean"] > 0 and done.detail["request"] == request.act_id
        assert again.ctx.steering.reevals == {}
    finally:
        await again.close()
