"""The SQLite store: round trips, batching, crash consistency, refusals, error propagation."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

import engine.store.opening as opening
from engine.store import SCHEMA_VERSION, RunRecord, Store, StoreError, read_only_open

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FakeCall:  # shaped like engine.llm.client.CallRecord
    endpoint: str = "task"
    url: str = "http://127.0.0.1:8000/v1"
    model: str = "qwen"
    stage: str = "rollout"
    status: str = "ok"
    finish_reason: str | None = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 40
    latency_s: float = 1.5
    ttft_s: float | None = 0.3
    retries: int = 0
    error: str | None = None
    started_at: float = 10.0


# Any object with the attributes will do; ttft_s may be absent.
FAILED_CALL = SimpleNamespace(endpoint="reflection", url="sim://", model="sim-qwen3-8b", stage="propose",
                              status="error", finish_reason=None, prompt_tokens=7, completion_tokens=0,
                              latency_s=0.25, retries=3, error="timeout", started_at=11.0)


def add_run(store: Store, run_id: str = "r1", created_at: float = 1.0, **over: object) -> None:
    args: dict = dict(task="rules", task_path="tasks/rules", config_json={"b": 1, "a": {"z": 2, "y": 1}},
                      seed=7, mode="async", policy="bounded", backend="sim", status="running",
                      created_at=created_at)
    args.update(over)
    store.insert_run(run_id, **args)


def raw(path: Path) -> sqlite3.Connection:
    """An independent connection: it only sees what the store has committed."""
    return sqlite3.connect(path)


async def loaded(store: Store, run_id: str = "r1") -> RunRecord:
    await store.flush()
    rec = await store.load_run(run_id)
    assert rec is not None
    return rec


async def test_round_trip_of_every_write_method(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = await Store.open(db, create=True)
    add_run(store)
    store.update_run("r1", status="done", updated_at=5.0, pool_version=3, rng_state_json={"s": [1, 2]},
                     counters_json={"items": 4}, summary_json={"best": 0.9}, backend="vllm")
    store.upsert_artifact("r1", artifact_id="a1", text="child", status="pending", parent_ids=["a0"],
                          created_version=2, val_mean=None, val_scores=None, minibatch=["e1", "e2"],
                          created_at=3.0, meta={"op": "reflect"})
    store.upsert_artifact("r1", artifact_id="a0", text="seed", status="active", parent_ids=[],
                          created_version=0, val_mean=0.25, val_scores={"v2": 0.5, "v1": 0.0},
                          minibatch=None, created_at=2.0, meta={})
    # Upsert updates every column except created_at.
    store.upsert_artifact("r1", artifact_id="a1", text="child v2", status="active", parent_ids=["a0"],
                          created_version=2, val_mean=0.75, val_scores={"v1": 1.0, "v2": 0.5},
                          minibatch=["e1", "e2"], created_at=99.0, meta={"op": "reflect", "n": 1})
    store.insert_lineage("r1", "a0", "a1", "reflect", 3.0)
    store.insert_evaluations("r1", "a1", [("v1", "val", 1.0, "Correct.", "evaluate"),
                                          ("v2", "val", 0.5, "Sort fruit.", "evaluate")], 4.0)
    store.insert_pool_event("r1", 1, "seed", "a0", {"why": "seed"}, 2.0)
    store.insert_pool_event("r1", 2, "add", "a1", {"val_mean": 0.75}, 4.0)
    store.upsert_item("r1", item_id="i1", created_version=1, parent_artifact_id="a0", stage="rollout",
                      payload={"minibatch": ["e1"]}, outcome=None, error=None, created_at=2.5,
                      updated_at=2.5)
    store.upsert_item("r1", item_id="i2", created_version=1, parent_artifact_id="a0", stage="update",
                      payload={}, outcome="accepted", error=None, created_at=2.6, updated_at=4.0)
    store.upsert_item("r1", item_id="i3", created_version=2, parent_artifact_id="a1", stage="propose",
                      payload={"k": 1}, outcome="failed", error="length", created_at=2.7, updated_at=4.1)
    store.insert_item_stage("r1", item_id="i2", stage="rollout", version_at_consume=1, gap=0,
                            enqueued_at=2.6, started_at=2.7, finished_at=3.0, outcome="ok")
    store.insert_llm_call("r1", FakeCall(), item_id="i2")
    store.insert_llm_call("r1", FAILED_CALL)
    store.insert_staleness("r1", item_id="i3", stage="evaluate", policy="bounded", gap=2, item_version=2,
                           pool_version=4, decision="drop", reason="gap 2 > 1", created_at=4.2)
    await store.close()

    ro = await read_only_open(db)
    rec = await ro.load_run("r1")
    assert isinstance(rec, RunRecord)
    assert (rec.task, rec.task_path, rec.seed, rec.mode, rec.policy) == ("rules", "tasks/rules", 7,
                                                                         "async", "bounded")
    assert (rec.status, rec.backend, rec.created_at, rec.updated_at) == ("done", "vllm", 1.0, 5.0)
    assert rec.config == {"a": {"y": 1, "z": 2}, "b": 1}
    assert (rec.rng_state, rec.counters, rec.summary, rec.pool_version) == (
        {"s": [1, 2]}, {"items": 4}, {"best": 0.9}, 3)
    assert [a["artifact_id"] for a in rec.artifacts] == ["a0", "a1"]  # created_version order
    a1 = rec.artifacts[1]
    assert a1 == {"artifact_id": "a1", "text": "child v2", "status": "active", "parent_ids": ["a0"],
                  "created_version": 2, "val_mean": 0.75, "val_scores": {"v1": 1.0, "v2": 0.5},
                  "minibatch": ["e1", "e2"], "created_at": 3.0, "meta": {"n": 1, "op": "reflect"},
                  "components": None}
    assert rec.artifacts[0]["minibatch"] is None and rec.artifacts[0]["parent_ids"] == []
    assert rec.lineage == [{"parent_id": "a0", "child_id": "a1", "operator": "reflect", "created_at": 3.0}]
    assert [(e["version"], e["kind"], e["detail"]) for e in rec.pool_events] == [
        (1, "seed", {"why": "seed"}), (2, "add", {"val_mean": 0.75})]
    assert [i["item_id"] for i in rec.open_items] == ["i1"]
    assert rec.open_items[0]["payload"] == {"minibatch": ["e1"]}
    groups = rec.counts.pop("call_groups")  # the calls grouped for pricing (engine/costs/spend.py)
    # endpoint, url, model, stage, calls, prompt tokens, completion tokens, latency: the same calls
    assert (sum(g[4] for g in groups), sum(g[5] or 0 for g in groups), sum(g[6] or 0 for g in groups)) == (2, 107, 40)
    assert rec.counts == {"items": {"open": 1, "accepted": 1, "failed": 1}, "llm_calls": 2,
                          "llm_calls_by_status": {"ok": 1, "error": 1}, "prompt_tokens": 107,
                          "completion_tokens": 40, "evaluations": 2, "proposals": {}}

    evals = await ro.fetch_rows("evaluations", "r1")
    assert [(e["example_id"], e["score"], e["feedback"]) for e in evals] == [
        ("v1", 1.0, "Correct."), ("v2", 0.5, "Sort fruit.")]
    stages = await ro.fetch_rows("item_stages", "r1")
    assert stages == [{"item_id": "i2", "stage": "rollout", "version_at_consume": 1, "gap": 0,
                       "enqueued_at": 2.6, "started_at": 2.7, "finished_at": 3.0, "outcome": "ok"}]
    calls = await ro.fetch_rows("llm_calls", "r1")
    assert calls[0] == {"endpoint": "task", "url": "http://127.0.0.1:8000/v1", "model": "qwen",
                        "stage": "rollout", "status": "ok", "finish_reason": "stop", "prompt_tokens": 100,
                        "completion_tokens": 40, "latency_s": 1.5, "ttft_s": 0.3, "retries": 0,
                        "error": None, "item_id": "i2", "created_at": 10.0, "cached_tokens": 0,
                        "request_blobs": None, "response_blob": None}  # FakeCall carries no texts
    assert (calls[1]["status"], calls[1]["error"], calls[1]["retries"], calls[1]["item_id"],
            calls[1]["ttft_s"], calls[1]["created_at"]) == ("error", "timeout", 3, None, None, 11.0)
    stale = await ro.fetch_rows("staleness", "r1")
    assert stale == [{"item_id": "i3", "stage": "evaluate", "policy": "bounded", "gap": 2,
                      "item_version": 2, "pool_version": 4, "decision": "drop", "reason": "gap 2 > 1",
                      "created_at": 4.2, "tokens": 0, "detail": None}]
    assert await ro.load_run("nope") is None
    await ro.close()

    with raw(db) as conn:  # sorted keys, so equal values give equal text
        assert conn.execute("SELECT config_json FROM runs").fetchone()[0] == '{"a": {"y": 1, "z": 2}, "b": 1}'



async def test_flush_commits_what_was_enqueued_before_it(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    # A long delay: without flush() nothing would be written for 30 s.
    store = await Store.open(db, create=True, max_batch=10_000, max_delay_s=30.0)
    add_run(store)
    for v in range(50):
        store.insert_pool_event("r1", v, "add", None, {}, float(v))
    assert store.pending_writes == 51
    await asyncio.sleep(0.05)
    with raw(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    await asyncio.wait_for(store.flush(), 60.0)  # a hang limit, not a speed check
    assert store.pending_writes == 0 and store.written_ops == 51
    with raw(db) as conn:
        assert conn.execute("SELECT count(*) FROM pool_events").fetchone()[0] == 50
    await store.close()


async def test_full_batch_is_written_without_waiting_for_the_delay(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    store = await Store.open(db, create=True, max_batch=20, max_delay_s=30.0)
    add_run(store)
    for v in range(39):
        store.insert_pool_event("r1", v, "add", None, {}, float(v))
    for _ in range(200):  # two full batches of 20 go out; nothing waits 30 s
        if store.written_ops == 40:
            break
        await asyncio.sleep(0.01)
    assert store.written_ops == 40
    await store.close()


_CRASH_SCRIPT = textwrap.dedent("""
    import asyncio, os, sys
    from engine.store import Store

    async def main(path, steps, stop_after):
        store = await Store.open(path, create=True, max_batch=7, max_delay_s=0.0)
        store.insert_run("r", task="t", task_path=None, config_json={}, seed=0, mode="async",
                         policy="p", backend="sim", status="running", created_at=0.0)
        for v in range(steps):
            store.insert_pool_event("r", v, "add", f"a{v}", {"v": v}, float(v))
            store.update_run("r", pool_version=v, counters_json={"steps": v + 1})
            store.upsert_item("r", item_id=f"i{v}", created_version=v, parent_artifact_id=None,
                              stage="rollout", payload={"v": v}, outcome=None, error=None,
                              created_at=float(v), updated_at=float(v))
        while store.written_ops < stop_after:
            await asyncio.sleep(0)
        os._exit(0)  # a crash: no flush, no close, no WAL checkpoint

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
""")


def _state_after(ops: int) -> tuple[int, int | None, int]:
    """(pool events, runs.pool_version, items) after the first `ops` ops of the crash script."""
    steps_with = lambda offset: max(0, (ops - offset + 2) // 3)  # noqa: E731 - ops at 1+3v, 2+3v, 3+3v
    updates = steps_with(2)
    return steps_with(1), (updates - 1 if updates else None), steps_with(3)


async def test_crash_leaves_a_prefix_of_whole_batches(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    steps, stop_after = 1000, 600
    subprocess.run([sys.executable, "-c", _CRASH_SCRIPT, str(db), str(steps), str(stop_after)],
                   cwd=REPO, check=True, timeout=60)
    store = await Store.open(db, create=False)
    assert await store.integrity_check() == "ok"
    rec = await loaded(store, "r")
    items = await store.fetch_rows("items", "r")
    versions = [e["version"] for e in rec.pool_events]
    state = (len(versions), rec.pool_version if rec.counters else None, len(items))
    matches = [n for n in range(1, 3 * steps + 2) if _state_after(n) == state]
    assert len(matches) == 1, state
    committed = matches[0]
    assert stop_after <= committed < 3 * steps + 1  # killed mid-way
    assert committed % 7 == 0  # batches of 7 ops are all-or-nothing
    assert versions == list(range(len(versions)))  # a prefix, nothing skipped
    assert [i["item_id"] for i in items] == [f"i{v}" for v in range(len(items))]
    if rec.counters:
        assert rec.counters == {"steps": rec.pool_version + 1}
    await store.close()


async def test_failed_op_surfaces_in_flush_and_on_error(tmp_path: Path) -> None:
    seen: list[StoreError] = []
    store = await Store.open(tmp_path / "e.db", create=True, on_error=seen.append)
    add_run(store)
    store.insert_pool_event("r1", 1, "seed", "a0", {}, 1.0)
    store.insert_pool_event("r1", 1, "dup", "a0", {}, 1.0)  # same primary key
    store.insert_lineage("r1", "a0", "a1", "reflect", 2.0)
    with pytest.raises(StoreError, match=r"insert_pool_event failed: UNIQUE constraint failed"):
        await store.flush()
    assert len(seen) == 1 and "UNIQUE" in str(seen[0])
    # Only the failing op is skipped; ops around it, even in the same batch, are kept.
    rec = await loaded(store)  # the error was reported once: this flush passes
    assert [e["kind"] for e in rec.pool_events] == ["seed"] and len(rec.lineage) == 1
    await store.close()


async def test_error_inside_a_grouped_batch_skips_only_the_bad_row(tmp_path: Path) -> None:
    seen: list[StoreError] = []
    store = await Store.open(tmp_path / "g.db", create=True, on_error=seen.append)
    add_run(store)
    for v in [0, 1, 2, 1, 3, 4, 4]:  # consecutive same-statement ops go through executemany
        store.insert_pool_event("r1", v, "add", None, {"v": v}, float(v))
    with pytest.raises(StoreError, match=r"UNIQUE constraint failed.*\(and 1 more store errors\)"):
        await store.flush()
    assert len(seen) == 2
    assert [e["version"] for e in (await loaded(store)).pool_events] == [0, 1, 2, 3, 4]
    await store.close()


async def test_pending_error_is_raised_by_close_once(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "c.db", create=True)
    store.insert_lineage("ghost", "a", "b", "op", 1.0)  # no such run: foreign key refuses it
    with pytest.raises(StoreError, match="FOREIGN KEY constraint failed"):
        await store.close()
    await store.close()  # idempotent
    assert store.closed
    with pytest.raises(StoreError, match="closed"):
        add_run(store)


async def test_lost_connection_stops_the_writer_and_keeps_failing(tmp_path: Path) -> None:
    seen: list[StoreError] = []
    store = await Store.open(tmp_path / "l.db", create=True, on_error=seen.append)
    add_run(store)
    await store.flush()
    store._writer._conn.close()  # pull the connection out from under the writer
    store.insert_pool_event("r1", 0, "add", None, {}, 1.0)
    store.insert_pool_event("r1", 1, "add", None, {}, 1.0)
    with pytest.raises(StoreError, match="store writer stopped"):
        await store.flush()
    store.insert_pool_event("r1", 2, "add", None, {}, 1.0)
    with pytest.raises(StoreError, match="3 writes were not saved"):
        await store.flush()
    assert len(seen) == 1
    with pytest.raises(StoreError, match="store writer stopped"):
        await store.close()


async def test_bad_arguments_fail_at_the_call_site(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "a.db", create=True)
    add_run(store)
    with pytest.raises(StoreError, match="unknown column"):
        store.update_run("r1", colour="red")
    with pytest.raises(StoreError, match="meta"):
        store.upsert_artifact("r1", artifact_id="x", text="", status="s", parent_ids=[],
                              created_version=0, val_mean=None, val_scores=None, minibatch=None,
                              created_at=0.0, meta={"f": object()})
    with pytest.raises(StoreError, match="cannot store a list"):
        store.insert_lineage("r1", ["a"], "b", "op", 0.0)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="is not JSON text"):
        store.update_run("r1", summary_json="{not json")
    with pytest.raises(StoreError, match="is not \\(example_id, split"):
        store.insert_evaluations("r1", "a0", [("e1", "val", 1.0)], 0.0)  # type: ignore[list-item]
    assert store.pending_writes == 1
    # *_json arguments also take JSON text (e.g. model_dump_json()); other arguments store a str as is.
    store.update_run("r1", config_json='{"z": 1, "a": [1, 2]}')
    store.upsert_artifact("r1", artifact_id="x", text="", status="s", parent_ids=[], created_version=0,
                          val_mean=None, val_scores=None, minibatch="e1,e2", created_at=0.0, meta=None)
    rec = await loaded(store)
    assert rec.config == {"a": [1, 2], "z": 1}
    assert (rec.artifacts[0]["minibatch"], rec.artifacts[0]["meta"]) == ("e1,e2", {})
    await store.close()



async def test_wal_mode_and_integrity(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    store = await Store.open(db, create=True)
    add_run(store)
    await store.flush()
    with raw(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert await store.integrity_check() == "ok"
    assert await store.schema_version() == SCHEMA_VERSION
    await store.close()


async def test_list_runs_newest_first(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "l.db", create=True)
    assert await store.latest_run_id() is None
    add_run(store, "old", created_at=10.0)
    add_run(store, "new", created_at=30.0)
    add_run(store, "mid", created_at=20.0)
    add_run(store, "new2", created_at=30.0)  # same time: the later insert counts as newer
    store.update_run("mid", summary_json={"best": 0.5}, pool_version=4)
    await store.flush()
    runs = await store.list_runs()
    assert [r["run_id"] for r in runs] == ["new2", "new", "mid", "old"]
    assert runs[2]["summary"] == {"best": 0.5} and runs[2]["pool_version"] == 4
    assert set(runs[0]) == {"run_id", "task", "status", "mode", "policy", "backend", "seed",
                            "created_at", "updated_at", "pool_version", "summary"}
    assert await store.latest_run_id() == "new2"
    await store.close()


async def test_reopen_keeps_data_and_delete_run_cascades(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    async with await Store.open(db, create=True) as store:
        add_run(store)
        store.insert_lineage("r1", "a", "b", "op", 1.0)
    async with await Store.open(db, create=True) as store:
        assert [r["run_id"] for r in await store.list_runs()] == ["r1"]
        store.delete_run("r1")
        await store.flush()
        assert await store.load_run("r1") is None
        assert await store.fetch_rows("lineage", "r1") == []


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    await (await Store.open(db, create=True)).close()
    with raw(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    msg = (rf"was written by a newer evotui \(schema v{SCHEMA_VERSION + 1}, this one knows "
           rf"v{SCHEMA_VERSION}\); upgrade evotui")
    with pytest.raises(StoreError, match=msg):
        await Store.open(db, create=True)
    with pytest.raises(StoreError, match=msg):
        await read_only_open(db)


async def test_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("just some notes, not SQLite at all\n" * 40)
    with pytest.raises(StoreError, match=r"notes.txt is not an evotui database \(file is not a "
                                         r"database\); pass another --db"):
        await Store.open(junk, create=True)
    assert junk.read_text().startswith("just some notes")


async def test_other_programs_sqlite_file_is_refused_and_untouched(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with raw(other) as conn:
        conn.execute("CREATE TABLE songs (title TEXT)")
    with pytest.raises(StoreError, match=r"is not an evotui database .*another program"):
        await Store.open(other, create=True)
    with raw(other) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["songs"]


async def test_missing_database_and_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"no database at .*gone.db; check --db or run `evotui runs`"):
        await Store.open(tmp_path / "gone.db", create=False)
    with pytest.raises(StoreError, match=r"no database at"):
        await read_only_open(tmp_path / "gone.db")
    nested = tmp_path / "no" / "such" / "dir" / "x.db"
    with pytest.raises(StoreError, match=r"directory .*dir does not exist; create it \(mkdir -p"):
        await Store.open(nested, create=True)
    assert list(tmp_path.iterdir()) == []  # nothing was created anywhere
    with pytest.raises(StoreError, match="is a directory"):
        await Store.open(tmp_path, create=True)


async def test_unwritable_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    # Root ignores permission bits, so the check is exercised through os.access.
    monkeypatch.setattr(opening.os, "access",
                        lambda p, mode: False if Path(p) == locked else real_access(p, mode))
    with pytest.raises(StoreError, match=r"cannot create .*x.db: directory .*locked is not writable; "
                                         r"fix its permissions or pass another --db"):
        await Store.open(locked / "x.db", create=True)
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
async def test_unwritable_directory_for_real(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="not writable"):
            await Store.open(locked / "x.db", create=True)
    finally:
        locked.chmod(0o700)


async def test_read_only_store_refuses_writes_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ro.db"
    async with await Store.open(db, create=True) as store:
        add_run(store)
    ro = await read_only_open(db)
    assert ro.readonly and [r["run_id"] for r in await ro.list_runs()] == ["r1"]
    with pytest.raises(StoreError, match="read-only"):
        add_run(ro, "r2")
    await ro.flush()  # nothing to write, nothing to raise
    await ro.close()
    with pytest.raises(ValueError):
        await Store.open(db, create=True, readonly=True)


async def test_pending_migrations_run_in_one_transaction(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    async with await Store.open(db, create=True) as store:
        add_run(store)
    # Pretend this build knows v2, whose step adds a column.
    v2 = ("ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'migrated'")
    monkeypatch.setattr(opening, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(opening, "pending_migrations", lambda current: (v2,)[current - SCHEMA_VERSION:])
    async with await Store.open(db, create=True) as store:
        assert await store.schema_version() == SCHEMA_VERSION + 1
    with raw(db) as conn:
        assert conn.execute("SELECT note FROM runs").fetchone()[0] == "migrated"

    # A failing step leaves the file exactly as it was.
    db2 = tmp_path / "m2.db"
    monkeypatch.undo()
    async with await Store.open(db2, create=True) as store:
        add_run(store)
    broken = ("ALTER TABLE runs ADD COLUMN note TEXT", "THIS IS NOT SQL")
    monkeypatch.setattr(opening, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(opening, "pending_migrations", lambda current: (broken,))
    with pytest.raises(StoreError, match=rf"cannot upgrade .*m2.db to schema v{SCHEMA_VERSION + 1}"):
        await Store.open(db2, create=True)
    with raw(db2) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert "note" not in [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
