"""engine/run/admin.py in process: an offline restore goes through the ledger (audited), leaves the
run's status alone, and a resumed run's pool follows it; refusals; a branch's seed links back."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from engine.run.admin import AdminError, branch_source, check_restorable, find_artifact, restore_offline, restore_with
from engine.run.runner import EngineRun

LAYERS = [("test", {"budget": {"max_proposals": 6}, "sim": {"time_scale": 2000.0}})]


async def _finished(db: Path) -> tuple[str, str, str]:
    """A completed run: its id, its best and another validated artifact."""
    run = await EngineRun.create("rules", LAYERS, db)
    result = await run.run()
    assert result.status == "completed"
    best = result.summary["best_id"]
    con = sqlite3.connect(db)
    others = [a for (a,) in con.execute("SELECT artifact_id FROM artifacts WHERE run_id = ? AND status IN "
                                        "('seed', 'confirmed') AND artifact_id != ?", (run.ctx.run_id, best))]
    con.close()
    return run.ctx.run_id, best, others[0]


def test_restore_offline_is_audited_and_a_resume_follows_it(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def go() -> None:
        run_id, best, other = await _finished(db)
        result = await restore_offline(db, run_id, other, "why not")
        assert (result.artifact_id, result.previous_id, result.by) == (other, best, "cli")
        con = sqlite3.connect(db)
        status = con.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
        con.close()
        assert status == "completed"  # the offline open does not leave it "running"
        resumed = await EngineRun.resume(db, run_id, {}, {})
        try:
            assert resumed.ctx.pool.best().artifact_id == other  # rebuilt from the pool_events rows
            change = resumed.ctx.ledger.last_restore()
            assert change is not None and change.version == result.pool_version
            # The same operation on a live run, as the control socket does it.
            again = restore_with(resumed.ctx.ledger, best, "", by="control")
            assert again.previous_id == other and resumed.ctx.pool.best().artifact_id == best
            with pytest.raises(AdminError, match="not in the pool"):
                restore_with(resumed.ctx.ledger, "zz", "", by="control")
        finally:
            await resumed.close()
        con = sqlite3.connect(db)
        details = [d for (d,) in con.execute("SELECT detail_json FROM pool_events WHERE run_id = ? AND kind = "
                                             "'restore' ORDER BY version", (run_id,))]
        con.close()
        assert '"by": "cli"' in details[0] and '"by": "control"' in details[1]

    asyncio.run(go())


def test_refusals_and_branch_source(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def go() -> None:
        run_id, best, other = await _finished(db)
        with pytest.raises(AdminError, match="no run 'nope'"):
            await find_artifact(db, "nope", "a000000", writable=True)
        with pytest.raises(AdminError, match="has no artifact"):
            await find_artifact(db, run_id, "zz", writable=True)
        with pytest.raises(AdminError, match="no database"):
            await find_artifact(tmp_path / "none.db", run_id, "a000000", writable=True)
        con = sqlite3.connect(db)
        con.execute("UPDATE artifacts SET status = 'removed' WHERE run_id = ? AND artifact_id = ?", (run_id, other))
        con.commit()
        con.close()
        with pytest.raises(AdminError, match="is removed"):
            check_restorable(await find_artifact(db, run_id, other, writable=True))
        with pytest.raises(AdminError, match="removed from run"):
            await branch_source(db, run_id, other)
        source = await branch_source(db, run_id, best)
        assert source.link == {"run_id": run_id, "artifact_id": best} and source.task_path

    asyncio.run(go())
