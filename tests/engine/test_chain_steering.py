"""Pin and ban in mode chain (engine/capabilities/chain_steering.py): no step takes a parent pick
there, so they move the chains' shared head."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.run.runner import EngineRun
from engine.steering import live as steering

CHAIN = [("test", {"budget": {"max_proposals": 8}, "sim": {"time_scale": 2000.0},
                   "pipeline": {"mode": "chain", "chains": 2}})]


def _parents_after(db: Path, run_id: str, before: set[str]) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT item_id, parent_artifact_id, payload_json FROM items WHERE run_id = ? "
                           "ORDER BY rowid", (run_id,)).fetchall()
    finally:
        con.close()
    return [r for r in rows if r[0] not in before]


async def _first_run(db: Path):
    first = await EngineRun.create("rules", CHAIN, db)
    result = await first.run()
    run_id = first.ctx.run_id
    con = sqlite3.connect(db)
    try:
        validated = [a for (a,) in con.execute("SELECT artifact_id FROM artifacts WHERE run_id = ? AND status IN "
                                               "('seed', 'confirmed') ORDER BY created_version", (run_id,))]
        before = {i for (i,) in con.execute("SELECT item_id FROM items WHERE run_id = ?", (run_id,))}
    finally:
        con.close()
    return run_id, result.summary["best_id"], validated, before


async def test_a_pin_moves_the_shared_head_to_the_pinned_candidate(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, best, validated, before = await _first_run(db)
    other = next(a for a in validated if a != best)
    run = await EngineRun.resume(db, run_id, {"max_proposals": 12}, {})
    steering.take(run.ctx, {"act": "pin", "target": other, "count": 1}, "python")
    assert (await run.run()).status == "completed"
    assert run.ctx.staleness_counts["chain_steered"] >= 1
    new = _parents_after(db, run_id, before)
    assert new and new[0][1] == other  # the first step admitted after the pin starts from it
    assert '"head_text"' in new[0][2]


async def test_a_ban_of_the_head_moves_it_to_the_best_candidate_not_banned(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id, best, validated, before = await _first_run(db)
    run = await EngineRun.resume(db, run_id, {"max_proposals": 12}, {})
    head = run.ctx.chain.head_base
    steering.take(run.ctx, {"act": "ban", "target": head}, "python")
    assert (await run.run()).status == "completed"
    new = _parents_after(db, run_id, before)
    assert new and all(parent != head for _, parent, _ in new)
    assert run.ctx.staleness_counts["chain_steered"] >= 1
