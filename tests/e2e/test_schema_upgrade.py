"""Databases written by earlier releases are upgraded in place (v2 -> v3 -> v4, v3 -> v4) and
their interrupted runs resume to completion, recording LLM texts from then on.

Fixtures (task_path set to the built-in name so they are portable, stored sim time scale raised
to 2000 so the test is quick):
- v2_interrupted_run.db: schema v2, commit b8c795a, a run of `rules` killed with six items in flight.
- v3_interrupted_run.db: schema v3, commit eb2eda4, a run of `rules` (8 proposals, time scale 20)
  SIGKILLed with six items in flight; its dead driver's lease row is still there and is taken over.
"""

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.store import SCHEMA_VERSION, read_only_open
from tests.e2e.conftest import evotui, summary_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


async def _texts(db: Path, run_id: str) -> list[tuple[list | None, str | None, str]]:
    store = await read_only_open(db)
    try:
        return [(c["messages"], c["response"], c["status"]) async for c in store.iter_llm_calls(run_id)]
    finally:
        await store.close()


@pytest.mark.parametrize("fixture,version", [("v2_interrupted_run.db", 2), ("v3_interrupted_run.db", 3)])
def test_an_old_database_upgrades_and_its_interrupted_run_resumes(tmp_path: Path, fixture: str,
                                                                  version: int) -> None:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURES / fixture, db)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == version
    before = dict(con.execute("SELECT artifact_id, text FROM artifacts").fetchall())
    open_items = con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0]
    old_calls = con.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
    run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
    con.close()
    assert open_items == 6
    listed = evotui("runs", "--db", str(db))
    assert listed.returncode == 2 and "open it once for writing" in listed.stderr  # read-only refuses old schemas
    res = evotui("resume", "--db", str(db), "--no-ui", "--quiet")
    assert res.returncode == 0, res.stderr[-2000:]
    s = summary_of(res)
    assert s["status"] == "completed"
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 9
        assert con.execute("SELECT count(*) FROM migrations").fetchone()[0] == 0  # v9: added, empty (rules runs gepa)
        assert con.execute("SELECT count(*) FROM audit").fetchone()[0] == 0  # v6: added, empty
        assert con.execute("SELECT count(*) FROM steering").fetchone()[0] == 0  # v7: added, empty
        # v8: the calls made after the upgrade record their cached tokens (0 on the simulator)
        assert con.execute("SELECT count(*) FROM llm_calls WHERE cached_tokens != 0").fetchone()[0] == 0
        after = dict(con.execute("SELECT artifact_id, text FROM artifacts").fetchall())
        assert all(after[k] == v for k, v in before.items())
        assert con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM artifacts WHERE components_json IS NOT NULL").fetchone()[0] == 0
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    # Calls from before the upgrade have no texts; every call of the resumed session has them.
    calls = asyncio.run(_texts(db, run_id))
    assert len(calls) > old_calls
    assert all(m is None and r is None for m, r, _ in calls[:old_calls])
    resumed = calls[old_calls:]
    assert all(m and all(isinstance(x.get("content"), str) for x in m) for m, _, _ in resumed)
    assert all(isinstance(r, str) for m, r, status in resumed if status in ("ok", "length"))
    shown = evotui("show", "--db", str(db))
    assert shown.returncode == 0 and f"{len(resumed)} of {len(calls)} calls" in shown.stdout, shown.stdout
