"""Schema v7: the steering table, created fresh and added to a v6 database in place."""

from pathlib import Path

from engine.store import SCHEMA_VERSION, Store
from tests.old_schema import database_at


async def test_a_new_database_has_the_steering_table_and_keeps_rows_in_act_order(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "s.db", create=True)
    try:
        store.insert_run("r1", task="t", task_path=None, config_json={}, seed=0, mode="async", policy="full",
                         backend="sim", status="running", created_at=1.0)
        for act_id, act in ((2, "pin"), (1, "guide")):
            store.insert_steering("r1", {"run_id": "r1", "act_id": act_id, "act": act, "target": "a1", "text": None,
                                         "count": 3, "item_id": None, "by": "cli", "detail_json": '{"k": 1}',
                                         "created_at": 2.0})
        await store.flush()
        rows = await store.fetch_rows("steering", "r1")
    finally:
        await store.close()
    assert SCHEMA_VERSION >= 7  # later versions keep the table
    assert [(r["act_id"], r["act"], r["detail"]) for r in rows] == [(1, "guide", {"k": 1}), (2, "pin", {"k": 1})]


async def test_a_v6_database_gains_the_table_in_place(tmp_path: Path) -> None:
    db = database_at(tmp_path / "v6.db", 6)
    store = await Store.open(db, create=False)
    try:
        assert await store.schema_version() == SCHEMA_VERSION
        assert await store.fetch_rows("steering", "nobody") == []
    finally:
        await store.close()
