"""LLM texts in the store (schema v4): round trips, deduplication, the keep_llm_text switch, the
read API, batching, the v3 -> v4 migration, and the client's records that carry the texts."""

from __future__ import annotations

import asyncio
import itertools
import random
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.store.writer as writer_mod
from engine.config import EndpointConfig, StoreConfig
from engine.llm.client import CallRecord, LLMClient
from engine.llm.errors import LLMError
from engine.store import SCHEMA_VERSION, Store, blobs, read_only_open

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SYSTEM = {"role": "system", "content": "You sort fruit. " * 40}


@dataclass(frozen=True)
class Call:  # shaped like engine.llm.client.CallRecord, texts included
    messages: list[dict] | None = None
    response: str | None = None
    endpoint: str = "task"
    url: str = "sim://"
    model: str = "m"
    stage: str = "rollout"
    status: str = "ok"
    finish_reason: str | None = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    latency_s: float = 0.5
    ttft_s: float | None = None
    retries: int = 0
    error: str | None = None
    started_at: float = 1.0


def user(text: str) -> dict:
    return {"role": "user", "content": text}


async def new_store(path: Path, run_id: str = "r1", *, keep: bool | None = None, **open_kw) -> Store:
    store = await Store.open(path, create=True, **open_kw)
    config = {} if keep is None else {"store": {"keep_llm_text": keep}}
    store.insert_run(run_id, task="rules", task_path=None, config_json=config, seed=0, mode="async",
                     policy="full", backend="sim", status="running", created_at=1.0)
    return store


def blob_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM blobs").fetchone()[0]


async def test_texts_round_trip_through_blobs(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store = await new_store(db)
    ok = Call([SYSTEM, user("Sort: kiwi, apple")], "apple, kiwi")
    store.insert_llm_call("r1", ok, item_id="i1")
    store.insert_llm_call("r1", Call([SYSTEM, user("x")], status="error", error="timeout"))
    store.insert_llm_call("r1", Call([user("y")], status="cancelled", error="cancelled: the run stopped"))
    store.insert_llm_call("r1", Call([user("z")], ""))  # an empty response is a text too
    await store.close()

    ro = await read_only_open(db)
    calls = [c async for c in ro.iter_llm_calls("r1")]
    assert [c["call_id"] for c in calls] == [1, 2, 3, 4]
    assert calls[0]["messages"] == ok.messages and calls[0]["response"] == "apple, kiwi"
    assert calls[0]["item_id"] == "i1" and calls[0]["status"] == "ok"
    assert (calls[1]["messages"], calls[1]["response"]) == ([SYSTEM, user("x")], None)
    assert (calls[2]["messages"], calls[2]["response"]) == ([user("y")], None)
    assert calls[3]["response"] == ""
    one = await ro.llm_call_texts(1)
    assert one is not None and (one.call_id, one.messages, one.response) == (1, ok.messages, "apple, kiwi")
    assert await ro.llm_call_texts(99) is None
    await ro.close()


async def test_the_same_text_is_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    store = await new_store(db)
    for i in range(5):  # one system prompt, five user messages, two distinct responses
        store.insert_llm_call("r1", Call([SYSTEM, user(f"q{i}")], "same answer" if i % 2 else "other"))
    store.insert_llm_call("r1", Call([SYSTEM, user("q0")], "other"))  # a whole request again
    await store.close()
    assert blob_count(db) == 1 + 5 + 2
    # A new process (empty LRU) writing the same texts adds nothing either.
    store = await Store.open(db, create=False)
    store.insert_llm_call("r1", Call([SYSTEM, user("q1")], "same answer"))
    await store.flush()
    assert blob_count(db) == 8
    stats = await store.text_stats("r1")
    assert stats["calls"] == stats["calls_with_text"] == 7 and stats["blobs"] == 8
    assert stats["raw_bytes"] > stats["blob_bytes"] > 0  # the long system prompt compresses
    await store.close()


async def test_a_small_lru_still_dedups_in_the_database(tmp_path: Path) -> None:
    db = tmp_path / "lru.db"
    store = await new_store(db)
    store._texts = blobs.TextKeeper(capacity=2)
    texts = [f"text {i}" for i in range(6)]
    for i in range(30):
        store.insert_llm_call("r1", Call([user(texts[i % 6])], texts[(i + 1) % 6]))
    assert len(store._texts.recent) == 2
    await store.close()
    # Six user messages and six responses (distinct bytes: a message is JSON), each stored once.
    assert blob_count(db) == 12


def test_recent_hashes_evicts_the_least_recently_used() -> None:
    lru = blobs.RecentHashes(capacity=2)
    assert [lru.add(h) for h in (b"a", b"b", b"a", b"c", b"b", b"a")] == [False, False, True, False, False, False]
    assert len(lru) == 2
    with pytest.raises(ValueError):
        blobs.RecentHashes(capacity=0)


async def test_keep_llm_text_false_records_no_text(tmp_path: Path) -> None:
    assert StoreConfig().keep_llm_text is True
    db = tmp_path / "off.db"
    store = await new_store(db, keep=False)
    store.insert_llm_call("r1", Call([SYSTEM, user("q")], "a"))
    await store.close()
    assert blob_count(db) == 0
    # A resumed run learns the setting from its stored config (load_run); a later override wins.
    store = await Store.open(db, create=False)
    assert await store.load_run("r1") is not None
    store.insert_llm_call("r1", Call([SYSTEM, user("q")], "a"))
    store.keep_llm_text("r1", True)
    store.insert_llm_call("r1", Call([SYSTEM, user("q")], "a"))
    await store.flush()
    calls = [c async for c in store.iter_llm_calls("r1")]
    assert [(c["request_blobs"], c["messages"]) for c in calls[:2]] == [(None, None), (None, None)]
    assert calls[2]["messages"] == [SYSTEM, user("q")] and calls[2]["response"] == "a"
    await store.close()


async def test_iteration_pages_through_one_runs_calls_in_order(tmp_path: Path) -> None:
    db = tmp_path / "it.db"
    store = await new_store(db)
    store.insert_run("r2", task="rules", task_path=None, config_json={}, seed=0, mode="async",
                     policy="full", backend="sim", status="running", created_at=2.0)
    for i in range(7):
        store.insert_llm_call("r1" if i != 3 else "r2", Call([user(f"m{i}")], f"a{i}"))
    await store.flush()
    got = [(c["messages"][0]["content"], c["response"]) async for c in store.iter_llm_calls("r1", page=2)]
    assert got == [(f"m{i}", f"a{i}") for i in range(7) if i != 3]
    with pytest.raises(ValueError):
        [c async for c in store.iter_llm_calls("r1", page=0)]
    await store.close()


async def test_deleting_a_run_drops_only_the_texts_no_other_run_names(tmp_path: Path) -> None:
    db = tmp_path / "del.db"
    store = await new_store(db)
    store.insert_run("r2", task="rules", task_path=None, config_json={}, seed=0, mode="async",
                     policy="full", backend="sim", status="running", created_at=2.0)
    store.insert_llm_call("r1", Call([SYSTEM, user("only r1")], "shared answer"))
    store.insert_llm_call("r2", Call([SYSTEM, user("only r2")], "shared answer"))
    await store.flush()
    assert blob_count(db) == 4
    store.delete_run("r1")
    await store.flush()
    assert blob_count(db) == 3  # "only r1" went; the system prompt and the answer r2 names stay
    store.insert_llm_call("r2", Call([SYSTEM, user("only r1")], "shared answer"))  # the LRU forgot it
    await store.flush()
    calls = [c async for c in store.iter_llm_calls("r2")]
    assert calls[-1]["messages"] == [SYSTEM, user("only r1")]
    await store.close()


async def test_texts_go_through_the_one_writer_in_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[list[str]] = []
    real = writer_mod._write_batch

    def counting(conn, batch):
        batches.append([op.name for op in batch])
        return real(conn, batch)

    monkeypatch.setattr(writer_mod, "_write_batch", counting)
    db = tmp_path / "b.db"
    store = await new_store(db, max_batch=10_000, max_delay_s=30.0)
    for i in range(20):
        store.insert_llm_call("r1", Call([SYSTEM, user(f"q{i % 4}")], f"a{i % 3}"))
    # The run, 20 calls and their 1 + 4 + 3 new texts: nothing written before flush() ...
    assert store.pending_writes == 1 + 20 + 8
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone()[0] == 0
    await store.flush()
    # ... then one transaction, with each blob insert ahead of the call row that names it.
    assert len(batches) == 1 and batches[0].count("insert_blob") == 8
    assert batches[0].index("insert_blob") < batches[0].index("insert_llm_call")
    assert all(c["response"] is not None for c in [c async for c in store.iter_llm_calls("r1")])
    await store.close()


async def test_components_column_round_trips(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = await new_store(db)
    common = {"status": "active", "parent_ids": [], "created_version": 0, "val_mean": None,
              "val_scores": None, "minibatch": None, "created_at": 1.0, "meta": None}
    store.upsert_artifact("r1", artifact_id="one", text="prompt", **common)
    store.upsert_artifact("r1", artifact_id="two", text="main", components={"main": "x", "helper": "y"},
                          **common)
    await store.flush()
    rec = await store.load_run("r1")
    assert rec is not None
    assert {a["artifact_id"]: a["components"] for a in rec.artifacts} == {
        "one": None, "two": {"helper": "y", "main": "x"}}
    await store.close()


async def test_a_v3_database_migrates_and_records_texts(tmp_path: Path) -> None:
    db = tmp_path / "v3.db"
    shutil.copy(FIXTURES / "v3_interrupted_run.db", db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
        run_id, = conn.execute("SELECT run_id FROM runs").fetchone()
        old_calls = conn.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
    assert old_calls > 0
    store = await Store.open(db, create=False)
    assert await store.schema_version() == SCHEMA_VERSION == 9
    rec = await store.load_run(run_id)
    assert rec is not None and all(a["components"] is None for a in rec.artifacts)
    store.insert_llm_call(run_id, Call([SYSTEM, user("after the upgrade")], "ok"))
    await store.flush()
    calls = [c async for c in store.iter_llm_calls(run_id)]
    assert len(calls) == old_calls + 1
    assert all(c["messages"] is None and c["response"] is None for c in calls[:-1])  # before v4: none
    assert calls[-1]["messages"][1] == user("after the upgrade") and calls[-1]["response"] == "ok"
    assert await store.integrity_check() == "ok"
    await store.close()


# -- properties -------------------------------------------------------------------------------

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)  # lone surrogates included
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": ANY_TEXT})


@given(message=MESSAGE, text=ANY_TEXT)
def test_blob_encoding_round_trips_any_text(message: dict, text: str) -> None:
    raw = blobs.message_bytes(message)
    assert blobs.decode_message(blobs.decompress(blobs.compress(raw))) == message
    assert blobs.decode_text(blobs.decompress(blobs.compress(blobs.text_bytes(text)))) == text
    assert raw == blobs.message_bytes(dict(reversed(list(message.items()))))  # key order is not content


_dbs = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.lists(MESSAGE, max_size=3), st.none() | ANY_TEXT), min_size=1, max_size=6))
def test_store_round_trips_any_calls(tmp_path: Path, calls: list[tuple[list[dict], str | None]]) -> None:
    async def go() -> None:
        db = tmp_path / f"p{next(_dbs)}.db"
        store = await new_store(db)
        for messages, response in calls:
            store.insert_llm_call("r1", Call(messages, response))
        await store.flush()
        got = [(c["messages"], c["response"]) async for c in store.iter_llm_calls("r1", page=4)]
        distinct = {blobs.message_bytes(m) for ms, _ in calls for m in ms}
        distinct |= {blobs.text_bytes(r) for _, r in calls if r is not None}
        await store.close()
        assert got == calls
        assert blob_count(db) == len(distinct)

    asyncio.run(go())


# -- the client's records carry the texts ------------------------------------------------------

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]


def client(handler, records: list[CallRecord]) -> LLMClient:
    async def no_sleep(_: float) -> None:
        return None

    cfg = EndpointConfig(url="http://127.0.0.1:9/v1", model="m1", max_retries=0)
    return LLMClient(cfg, name="task", transport=httpx.MockTransport(handler), on_call=records.append,
                     sleep=no_sleep, rng=random.Random(0))


def reply(text: str) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop",
                                                  "message": {"role": "assistant", "content": text}}]})


async def test_client_records_carry_messages_and_response() -> None:
    records: list[CallRecord] = []
    async with client(lambda r: reply("Hi."), records) as c:
        await c.chat(MESSAGES, stage="rollout")
    async with client(lambda r: httpx.Response(400, json={"error": {"message": "bad request"}}), records) as c:
        with pytest.raises(LLMError):
            await c.chat(MESSAGES, stage="rollout")
    assert [(r.status, r.messages, r.response) for r in records] == [
        ("ok", MESSAGES, "Hi."), ("error", MESSAGES, None)]


async def test_client_records_the_shrunk_messages_it_sent() -> None:
    records: list[CallRecord] = []
    answers = iter([httpx.Response(413, text="prompt too long"), reply("Short.")])
    async with client(lambda r: next(answers), records) as c:
        await c.chat(MESSAGES, stage="propose", shrink=lambda messages, err: messages[1:])
    assert [(r.messages, r.response) for r in records] == [(MESSAGES[1:], "Short.")]


async def test_a_cancelled_call_records_its_messages() -> None:
    records: list[CallRecord] = []
    started = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with client(hang, records) as c:
        task = asyncio.create_task(c.chat(MESSAGES, stage="rollout"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [(r.status, r.messages, r.response) for r in records] == [("cancelled", MESSAGES, None)]
