"""Opening a database checks its pages: a damaged file is refused (DamagedDatabase, one line naming
`evotui recover`) and left byte for byte as it was; damage only a read meets is refused the same way."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from engine.store import DamagedDatabase, Store, StoreError
from engine.store.errors import is_damage
from tests.db_damage import damage_middle_leaf, damage_page

RUN = "r1"


async def make_db(path: Path, evaluations: int = 1500) -> Path:
    """A database of the current schema with one run and enough evaluations for a multi-page table,
    written in one transaction (close flushes it) so its page layout is the same every time."""
    store = await Store.open(path, create=True, max_batch=100_000, max_delay_s=3600.0)
    store.insert_run(RUN, task="rules", task_path=None, config_json={}, seed=0, mode="async", policy="full",
                     backend="test", status="interrupted", created_at=1.0)
    store.insert_evaluations(RUN, "a000000", [(f"ex{i}", "val", 0.5, "feedback " * 20, "validate")
                                              for i in range(evaluations)], created_at=2.0)
    await store.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("readonly", [True, False])
async def test_a_damaged_page_is_refused_at_open_and_the_file_is_untouched(tmp_path: Path, readonly: bool) -> None:
    db = await make_db(tmp_path / "runs.db")
    page = damage_middle_leaf(db, "evaluations")
    before = digest(db)
    with pytest.raises(DamagedDatabase) as err:
        await Store.open(db, create=not readonly, readonly=readonly)
    message = str(err.value)
    assert "\n" not in message and str(db) in message and f"evotui recover {db}" in message
    assert f"page {page}" in message  # SQLite's own words on what is wrong
    assert digest(db) == before


async def test_a_healthy_database_opens(tmp_path: Path) -> None:
    db = await make_db(tmp_path / "runs.db", evaluations=10)
    store = await Store.open(db, create=False, readonly=True)
    try:
        assert len(await store.fetch_rows("evaluations", RUN)) == 10
    finally:
        await store.close()


async def test_a_damaged_first_page_is_damage_not_a_foreign_file(tmp_path: Path) -> None:
    db = await make_db(tmp_path / "runs.db", evaluations=10)
    damage_page(db, 1, length=300)  # the 100-byte header (and its magic) survive
    with pytest.raises(DamagedDatabase, match="evotui recover"):
        await Store.open(db, create=False, readonly=True)


async def test_a_foreign_file_is_not_called_damaged(tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as err:
        await Store.open(junk, create=False, readonly=True)
    assert not isinstance(err.value, DamagedDatabase) and "not an evotui database" in str(err.value)


async def test_broken_json_in_a_row_is_damage_when_read(tmp_path: Path) -> None:
    """Pages intact, a row's content not: quick_check cannot see it, the read that meets it says so."""
    db = await make_db(tmp_path / "runs.db", evaluations=10)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET counters_json = '{\"tally\": {' WHERE run_id = ?", (RUN,))
    con.commit()
    con.close()
    store = await Store.open(db, create=False, readonly=True)
    try:
        with pytest.raises(DamagedDatabase, match=r"JSONDecodeError.*evotui recover"):
            await store.load_run(RUN)
        assert (await store.list_runs())[0]["run_id"] == RUN  # reads that do not meet it still work
    finally:
        await store.close()


def test_only_damage_counts_as_damage() -> None:
    assert is_damage(sqlite3.DatabaseError("database disk image is malformed"))
    assert is_damage(sqlite3.OperationalError("malformed JSON"))
    assert not is_damage(sqlite3.OperationalError("database is locked"))
    assert not is_damage(sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert not is_damage(sqlite3.OperationalError("no such table: x"))
