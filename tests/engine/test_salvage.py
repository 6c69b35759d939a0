"""engine.store.salvage (`evotui recover`): what is readable is copied, what is lost is counted."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.store import SCHEMA_VERSION, Store, StoreError
from engine.store.salvage import salvage
from tests.db_damage import damage_middle_leaf, leaf_pages
from tests.engine.test_db_check import RUN, make_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def rows(db: Path, sql: str, *args) -> list[tuple]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def by_table(report) -> dict:
    return {t.table: t for t in report.tables}


async def test_a_healthy_database_is_copied_whole(tmp_path: Path) -> None:
    db = await make_db(tmp_path / "runs.db", evaluations=700)
    report = salvage(db, tmp_path / "out.db")
    assert report.problem == "ok" and report.complete
    tables = by_table(report)
    assert tables["evaluations"].kept == 700 and tables["evaluations"].lost == 0
    assert tables["runs"].kept == 1
    out = tmp_path / "out.db"
    query = "SELECT rowid, * FROM evaluations ORDER BY rowid"
    assert rows(out, query) == rows(db, query)  # rowids (the write order) and every column kept
    assert rows(out, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert rows(out, "PRAGMA integrity_check") == [("ok",)]


async def test_a_damaged_page_loses_its_rows_and_only_those(tmp_path: Path) -> None:
    db = await make_db(tmp_path / "runs.db")
    before = rows(db, "SELECT rowid, example_id FROM evaluations ORDER BY rowid")
    damage_middle_leaf(db, "evaluations")
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    report = salvage(db, tmp_path / "out.db")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # the damaged file is only read
    assert "page" in report.problem and not report.complete
    ev = by_table(report)["evaluations"]
    assert ev.expected == len(before)  # counted through the intact index
    kept = rows(tmp_path / "out.db", "SELECT rowid, example_id FROM evaluations ORDER BY rowid")
    assert ev.kept == len(kept) and 0 < ev.lost == len(before) - len(kept)
    assert set(kept) < set(before)  # nothing invented
    assert kept[0] == before[0] and kept[-1] == before[-1]  # rows on either side of the damage survive
    assert ev.damage.skipped  # the walk says where it stepped over the damage
    store = await Store.open(tmp_path / "out.db", create=False, readonly=True)
    try:
        assert (await store.load_run(RUN)).run_id == RUN
        assert len(await store.fetch_rows("evaluations", RUN)) == len(kept)
    finally:
        await store.close()


async def test_rows_of_a_lost_run_are_dropped_and_counted(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = await Store.open(db, create=True, max_batch=100_000, max_delay_s=3600.0)  # one layout every time
    for n in range(400):  # enough runs for several leaf pages of the runs table
        run_id = f"run{n:04d}"
        store.insert_run(run_id, task="rules", task_path="/some/long/path/" * 8, config_json={}, seed=0,
                         mode="async", policy="full", backend="test", status="completed", created_at=float(n))
        store.insert_evaluations(run_id, "a0", [("ex", "val", 0.5, None, "validate")], created_at=float(n))
    await store.close()
    assert len(leaf_pages(db, "runs")) >= 3
    damage_middle_leaf(db, "runs")
    report = salvage(db, tmp_path / "out.db")
    runs, ev = by_table(report)["runs"], by_table(report)["evaluations"]
    assert 0 < runs.lost < 400 and runs.kept == 400 - runs.lost
    assert ev.orphaned == runs.lost and ev.kept == runs.kept  # one evaluation per run
    out = tmp_path / "out.db"
    assert rows(out, "PRAGMA foreign_key_check") == []
    assert rows(out, "SELECT count(*) FROM evaluations WHERE run_id NOT IN (SELECT run_id FROM runs)") == [(0,)]


def test_an_older_schema_comes_out_upgraded(tmp_path: Path) -> None:
    old = tmp_path / "v3.db"
    shutil.copy(FIXTURES / "v3_interrupted_run.db", old)
    report = salvage(old, tmp_path / "out.db")
    assert report.complete
    assert by_table(report)["audit"].note.startswith("not in the source")
    out = tmp_path / "out.db"
    assert rows(out, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert rows(out, "SELECT count(*) FROM artifacts") == rows(old, "SELECT count(*) FROM artifacts") != [(0,)]


async def test_unusable_paths_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    db = await make_db(tmp_path / "runs.db", evaluations=5)
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"mine")
    cases = {
        "already exists": (db, taken),
        "no database at": (tmp_path / "missing.db", tmp_path / "a.db"),
        "does not exist": (db, tmp_path / "no" / "dir" / "b.db"),
        "must be a new file": (db, db),
    }
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n" * 50)
    cases["not an SQLite database"] = (notes, tmp_path / "c.db")
    newer = tmp_path / "newer.db"
    shutil.copy(db, newer)
    con = sqlite3.connect(newer)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    cases["newer evotui"] = (newer, tmp_path / "d.db")
    for needle, (source, out) in cases.items():
        with pytest.raises(StoreError, match=needle):
            salvage(source, out)
    assert taken.read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["newer.db", "notes.txt", "runs.db", "taken.db"]
