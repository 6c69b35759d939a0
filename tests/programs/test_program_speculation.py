"""Speculation on program tasks (engine/capabilities/program_speculation.py): a candidate whose
early cascade stage scores above the pool's best enters the pool as speculative (in mode chain it is
the shared head at once) and is confirmed with its full score or removed when its item ends
otherwise; the confirmed pool never holds an unconfirmed program."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import build_config
from engine.run.setup import SetupError, check_combination
from engine.tasks.loader import load_any_task, with_program_settings
from evotui.bench.cascade_variant import BASE_MODULE, slow_variant
from tests.programs.helpers import run_program

FAST = {"sim": {"time_scale": 5000}}

# Stage 1 is circle_packing's own evaluation; stage 2 repeats it and raises for the programs
# FAILS picks (by their text): none, some or all, so both ends of a speculation happen.
CASCADE = '''
import hashlib
from {base} import evaluate as _full

FAILS = {fails}

def evaluate_stage1(program_path):
    return _full(program_path)

def evaluate_stage2(program_path):
    with open(program_path, "rb") as fh:
        if int(hashlib.sha256(fh.read()).hexdigest(), 16) % 4 < FAILS:
            raise RuntimeError("stage 2 found a problem")
    return _full(program_path)

def evaluate(program_path):
    return evaluate_stage2(program_path)
'''


def _cascade_task(tmp_path: Path, fails: int = 0) -> Path:
    """circle_packing with a two-stage cascade; stage 2 fails for `fails` in 4 programs (the bench's
    slow cascade copy, evotui/bench/cascade_variant.py, with this evaluator in place of its own)."""
    folder = slow_variant("circle_packing", 0.01, tmp_path)
    (folder / "evaluator.py").write_text(CASCADE.format(fails=fails, base=BASE_MODULE))
    return folder


async def _run(tmp_path: Path, fails: int, pipeline: dict, proposals: int):
    task = load_any_task(str(_cascade_task(tmp_path, fails)))
    orch, _, status = await run_program(task, tmp_path / "r.db", {**FAST, "seed": 1, "budget": {
        "max_proposals": proposals}, "pipeline": {"speculation": True, **pipeline}})
    assert status == "completed"
    ctx = orch.ctx
    assert "speculative" not in {a.status for a in ctx.pool.artifacts()}
    assert ctx.pool.best().status in ("seed", "confirmed")
    return ctx, ctx.tally


async def test_a_chain_builds_on_a_speculative_head_that_its_full_cascade_confirms(tmp_path: Path) -> None:
    ctx, t = await _run(tmp_path, 0, {"mode": "chain", "chains": 4}, 24)
    assert t.speculative_inserted > 0 and t.speculative_confirmed == t.speculative_inserted
    confirmed = [a for a in ctx.pool.artifacts() if "partial" in a.meta]
    assert len(confirmed) == t.speculative_inserted
    for art in confirmed:  # confirmed with its full cascade's score and meta, not the stage's
        assert art.status == "confirmed" and art.val_mean == art.meta["metrics"]["combined_score"]
        assert "diff" in art.meta and art.meta["partial"] > art.meta["threshold"]
    # Later steps built on them.
    started = {p for a in ctx.pool.artifacts() for p in a.parent_ids}
    assert started & {a.artifact_id for a in confirmed}
    assert ctx.pool.get(ctx.chain.head_base).status in ("seed", "confirmed")


async def test_a_speculative_program_whose_cascade_fails_leaves_the_pool(tmp_path: Path) -> None:
    # Every stage 2 fails (the seed's too: it scores 0), so each insert is removed.
    ctx, t = await _run(tmp_path, 4, {"mode": "async"}, 8)
    assert t.speculative_inserted > 0 and t.speculative_removed == t.speculative_inserted
    assert t.speculative_confirmed == 0 and [a.status for a in ctx.pool.confirmed()] == ["seed"]
    assert {a.status for a in ctx.pool.artifacts()} == {"seed", "removed"}


@pytest.mark.parametrize("mode", ["chain", "async"])
async def test_every_insert_is_confirmed_or_removed(tmp_path: Path, mode: str) -> None:
    _, t = await _run(tmp_path, 2, {"mode": mode}, 24)
    assert t.speculative_inserted > 0
    assert t.speculative_confirmed + t.speculative_removed == t.speculative_inserted


def test_speculation_needs_a_cascade_and_stage_reports(tmp_path: Path) -> None:
    config = build_config([("test", {"pipeline": {"speculation": True}})])
    with pytest.raises(SetupError, match="runs no cascade"):
        check_combination(config, load_any_task("circle_packing"))
    task = load_any_task(str(_cascade_task(tmp_path)))
    check_combination(config, task)  # a cascade, the local sandbox: fine
    ray = build_config([("test", {"pipeline": {"speculation": True}, "evaluator": {"backend": "ray"}})])
    with pytest.raises(SetupError, match="returns an evaluation whole"):
        check_combination(ray, with_program_settings(task, ray.program))


def test_a_resumed_item_owns_the_speculative_artifact_it_inserted() -> None:
    """A kill between the insert (pool rows) and the item's row naming it: on resume the item owns
    it again instead of inserting it a second time."""
    from engine.capabilities.speculation import adopt_speculative
    from engine.items import SpeculativeEntry, WorkItem
    from engine.pool import Artifact, Pool

    pool = Pool()
    pool.add(Artifact("a000000", "x = 1\n", (), 0, {"combined_score": 0.5}, status="seed"))
    pool.add(Artifact("a000003", "x = 2\n", ("a000000",), 0, {"combined_score": 0.7}, status="speculative",
                      meta={"partial": 0.7, "threshold": 0.5}))
    pool.add(Artifact("a000005", "x = 3\n", ("a000000",), 0, {"combined_score": 0.6}))
    items = [WorkItem(item_id=i, created_version=1, parent_id="a000000", minibatch=[], stage="evaluate",
                      created_at=0.0) for i in ("i000003", "i000004", "i000005")]
    assert adopt_speculative(pool, items) == 1
    assert items[0].speculative == SpeculativeEntry("a000003", 0.5, 2)
    assert items[1].speculative is None and items[2].speculative is None
    assert adopt_speculative(pool, items) == 0  # already its own
