"""Schema v9: island migrations as rows. The table is created fresh and added to a v8 database in
place; a row written twice is kept once. The ledger writes one row per migration the pool's
island fold makes (right after the pool_events row of the commit that set it off) and publishes
IslandsMigrated for it; a new ledger over a rebuilt fold (a resume) writes no row twice."""

from __future__ import annotations

import time
from pathlib import Path

from engine import events as ev
from engine.items import WorkItem
from engine.pool import Artifact, Pool
from engine.run.state import change_from_row
from engine.selection.islands import IslandSettings
from engine.ledger import Ledger
from engine.store import SCHEMA_VERSION, Store
from tests.old_schema import database_at
from engine.strategy.boltzmann import archive_of
from tests.engine.fakes import SEED_PROMPT, VAL_KEYWORDS, harness  # noqa: F401

VAL_IDS = [f"v{n}" for n in range(len(VAL_KEYWORDS))]
ROW = {"pool_version": 7, "at_commit": 6, "from_island": 1, "to_island": 0, "artifact_ids": ["a000004"],
       "trigger": "diversity", "from_diversity": 0.91, "to_diversity": 0.0, "threshold": 0.1, "interval": 3,
       "created_at": 1.0}


async def test_a_new_database_keeps_a_migration_once(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "m.db", create=True)
    try:
        store.insert_run("r1", task="t", task_path=None, config_json={}, seed=0, mode="sync", policy="full",
                         backend="sim", status="running", created_at=1.0)
        store.insert_migration("r1", {**ROW, "at_commit": 9, "pool_version": 10})
        store.insert_migration("r1", ROW)
        store.insert_migration("r1", {**ROW, "artifact_ids": ["other"], "created_at": 2.0})  # same key: ignored
        await store.flush()
        rows = await store.fetch_rows("migrations", "r1")
    finally:
        await store.close()
    assert SCHEMA_VERSION >= 9
    assert [(r["at_commit"], r["pool_version"], r["artifact_ids"], r["created_at"]) for r in rows] == [
        (6, 7, ["a000004"], 1.0), (9, 10, ["a000004"], 1.0)]
    assert rows[0]["trigger"] == "diversity" and rows[0]["threshold"] == 0.1 and rows[0]["interval"] == 3


async def test_a_v8_database_gains_the_table_in_place(tmp_path: Path) -> None:
    db = database_at(tmp_path / "v8.db", 8)
    store = await Store.open(db, create=False)
    try:
        assert await store.schema_version() == SCHEMA_VERSION
        assert await store.fetch_rows("migrations", "nobody") == []
    finally:
        await store.close()


def _art(aid: str, text: str, value: float, island: int | None, status: str = "confirmed") -> Artifact:
    return Artifact(artifact_id=aid, text=text, parent_ids=("a000000",) if island is not None else (),
                    created_version=0, val_scores={ex: value for ex in VAL_IDS}, status=status,
                    created_at=time.time(), meta={"selection": {"island": island}} if island is not None else {})


def _item(n: int) -> WorkItem:
    return WorkItem(item_id=f"i{n:06d}", created_version=1, parent_id="a000000", minibatch=["t0"], stage="update",
                    created_at=time.time())


SETTINGS = IslandSettings(islands=2, migration_interval=3, migration_share=0.5, bins=3, migration_threshold=0.1)


async def test_the_ledger_records_each_fold_migration_once_with_its_trigger(harness) -> None:  # noqa: F811
    run = await harness.create()
    ctx, ledger = run.ctx, run.ctx.ledger
    sub = run.bus.subscribe()
    ledger.seed(_art("a000000", SEED_PROMPT, 0.2, None, status="seed"))
    fold = archive_of(ctx.pool, SETTINGS)  # what the loongflow selector builds at its first pick
    # Island 1 gets children of very different lengths (spread over its cells), island 0 one
    # near-copy of the seed: their diversity differs, so island 1's elites migrate to island 0.
    texts = [(1, SEED_PROMPT + "x" * 400), (0, SEED_PROMPT + "y"), (1, SEED_PROMPT + "z" * 900),
             (1, SEED_PROMPT + "w" * 150), (0, SEED_PROMPT + "v"), (1, SEED_PROMPT + "u" * 650)]
    for n, (island, text) in enumerate(texts, start=1):
        ledger.commit(_item(n), _art(f"a{n:06d}", text, 0.3 + n / 100, island))
    log = fold.migration_log()
    assert log and all(m.version for m in log)
    await ctx.store.flush()
    rows = await harness.rows("migrations", ctx.run_id)
    assert [(r["pool_version"], r["at_commit"], r["from_island"], r["to_island"], tuple(r["artifact_ids"]),
             r["from_diversity"], r["to_diversity"]) for r in rows] == [
        (m.version, m.at, m.source, m.target, m.artifact_ids, m.source_diversity, m.target_diversity) for m in log]
    assert all(r["trigger"] == "diversity" and r["threshold"] == 0.1 and r["interval"] == 3 for r in rows)
    assert any(r["artifact_ids"] for r in rows)
    # The commit that set a migration off is the one whose version the row names, 3 live artifacts apart.
    assert all(r["at_commit"] % 3 == 0 and r["pool_version"] == r["at_commit"] for r in rows)
    published = [e for e in sub.drain() if isinstance(e, ev.IslandsMigrated)]
    assert [(e.pool_version, e.from_island, e.to_island, e.artifact_ids) for e in published] == [
        (m.version, m.source, m.target, m.artifact_ids) for m in log]

    # A resumed run: a new ledger and a fold rebuilt from the artifacts offer the same migrations
    # again; no row is written twice and no event is published for them.
    resumed = Pool()
    resumed.restore(ctx.pool.artifacts(), [change_from_row(e) for e in await harness.rows("pool_events", ctx.run_id)])
    assert archive_of(resumed, SETTINGS).migration_log() == log
    ctx.pool = resumed
    again = Ledger(ctx, ledger.rows)
    again.record_migrations()
    await ctx.store.flush()
    assert len(await harness.rows("migrations", ctx.run_id)) == len(rows)
    assert not [e for e in sub.drain() if isinstance(e, ev.IslandsMigrated)]
    await run.close()
