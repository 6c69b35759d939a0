"""A database written by the previous release (schema v2, commit b8c795a: a run of `rules` killed
with six items in flight; task_path set to the built-in name so the fixture is portable, and
its stored sim time scale raised to 2000 so the test is quick) is
upgraded in place and its run resumes to completion."""

import shutil
import sqlite3
from pathlib import Path

from engine.store import SCHEMA_VERSION
from tests.e2e.conftest import evotui, summary_of

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v2_interrupted_run.db"


def test_a_v2_database_upgrades_and_its_interrupted_run_resumes(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    before = dict(con.execute("SELECT artifact_id, text FROM artifacts").fetchall())
    open_items = con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0]
    con.close()
    assert open_items == 6
    listed = evotui("runs", "--db", str(db))
    assert listed.returncode == 2 and "open it once for writing" in listed.stderr  # read-only refuses v2
    res = evotui("resume", "--db", str(db), "--no-ui", "--quiet")
    assert res.returncode == 0, res.stderr[-2000:]
    s = summary_of(res)
    assert s["status"] == "completed"
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        after = dict(con.execute("SELECT artifact_id, text FROM artifacts").fetchall())
        assert all(after[k] == v for k, v in before.items())
        assert con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
