"""Cached prompt tokens: read from the server's usage (httpx.MockTransport), recorded with the call,
stored (schema v8), and priced at the model's cached rate, live and after a resume; and a
rate limit's Retry-After honoured by every request of the client."""

from __future__ import annotations

import json
import random
from pathlib import Path

import httpx
import pytest

from engine.costs.budget import Budget
from engine.config import BudgetConfig, EndpointConfig, RunConfig
from engine.llm.client import LLMClient
from engine.llm.records import CallRecord
from engine.pricing import PriceTable
from engine.costs.spend import SpendMeter, stored_spend
from engine.store import Store
from tests.old_schema import database_at

URL = "https://api.example/v1"
MESSAGES = [{"role": "user", "content": "Say hi."}]


def _reply(usage: dict) -> httpx.Response:
    return httpx.Response(200, json={"id": "c", "object": "chat.completion", "usage": usage, "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]})


async def _call(usage: dict, stream: bool = False) -> CallRecord:
    records: list[CallRecord] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not stream:
            return _reply(usage)
        chunks = [{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    client = LLMClient(EndpointConfig(url=URL, model="gpt-4o", stream=stream), name="task",
                       transport=httpx.MockTransport(handler), on_call=records.append)
    async with client:
        await client.chat(MESSAGES, stage="propose")
    return records[0]


@pytest.mark.parametrize("stream", [False, True])
async def test_cached_tokens_are_read_from_openai_usage(stream):
    usage = {"prompt_tokens": 2000, "completion_tokens": 100, "total_tokens": 2100,
             "prompt_tokens_details": {"cached_tokens": 1536}}
    rec = await _call(usage, stream)
    assert (rec.prompt_tokens, rec.cached_tokens) == (2000, 1536)


async def test_servers_that_report_no_cache_record_zero_and_nonsense_is_ignored():
    assert (await _call({"prompt_tokens": 10, "completion_tokens": 2})).cached_tokens == 0
    assert (await _call({"prompt_tokens": 10, "completion_tokens": 2,
                         "prompt_tokens_details": {"cached_tokens": -4}})).cached_tokens == 0
    assert (await _call({"prompt_tokens": 10, "completion_tokens": 2,
                         "prompt_tokens_details": None})).cached_tokens == 0
    # More cached than prompt (a confused proxy): capped at the prompt, never a negative price.
    assert (await _call({"prompt_tokens": 10, "completion_tokens": 2,
                         "prompt_tokens_details": {"cached_tokens": 50}})).cached_tokens == 10


def test_every_shipped_model_has_a_cached_price():
    table = PriceTable.load()
    assert table.prices and all(p.cached_input is not None for p in table.prices.values())


def _config() -> RunConfig:
    return RunConfig.model_validate({"task_llm": {"url": URL, "model": "gpt-4o", "max_tokens": 1000}})


def test_budget_charges_cached_tokens_at_the_cached_rate():
    budget = Budget(BudgetConfig(max_usd=10.0), meter=SpendMeter.for_config(_config()))
    rec = CallRecord(endpoint="task", url=URL, model="gpt-4o", stage="propose", status="ok", finish_reason="stop",
                     prompt_tokens=1_000_000, completion_tokens=0, latency_s=1.0, ttft_s=None, retries=0,
                     error=None, started_at=0.0, cached_tokens=600_000)
    usd, _ = budget.charge_call(rec)
    # gpt-4o: $2.50 input, $1.25 cached input per million.
    assert usd == pytest.approx(0.4 * 2.50 + 0.6 * 1.25)


async def test_stored_calls_keep_their_cached_tokens_so_a_resume_prices_them_the_same(tmp_path: Path):
    config = _config()
    live = SpendMeter.for_config(config)
    store = await Store.open(tmp_path / "runs.db", create=True)
    store.insert_run("r1", task="rules", task_path="tasks/rules", config_json=config.model_dump(mode="json"),
                     seed=0, mode="async", policy="full", backend="http", status="running", created_at=1.0)
    for prompt, cached, completion in ((3000, 2048, 200), (1200, 0, 90), (5000, 4096, 400)):
        rec = CallRecord(endpoint="task", url=URL, model="gpt-4o", stage="propose", status="ok",
                         finish_reason="stop", prompt_tokens=prompt, completion_tokens=completion, latency_s=1.0,
                         ttft_s=None, retries=0, error=None, started_at=2.0, cached_tokens=cached)
        live.record(rec.endpoint, rec.url, rec.model, rec.stage, prompt, completion, 1.0, cached=cached)
        store.insert_llm_call("r1", rec)
    await store.flush()
    record = await store.load_run("r1")
    await store.close()
    resumed = stored_spend(record.config, record.counts)
    uncached = (3000 + 1200 + 5000) * 2.5e-6 + (200 + 90 + 400) * 10e-6
    assert resumed["usd"] == pytest.approx(live.usd, abs=1e-6)
    assert resumed["usd"] < uncached - 0.007  # 6144 cached tokens at half price: $0.00768 less


def test_a_group_stored_before_schema_v8_has_no_cached_tokens():
    meter = SpendMeter.for_config(_config())
    meter.restore([["task", URL, "gpt-4o", "propose", 2, 2_000_000, 0, 2.0]])
    assert meter.usd == pytest.approx(5.0)


async def test_retry_after_is_honoured_beyond_our_backoff_cap_and_holds_the_other_requests():
    """A 429 saying "in 20 s" (over backoff_max_s = 2) is waited out in full, and a request
    started meanwhile waits for the same instant instead of running into the limit."""
    now = [0.0]
    sleeps: list[float] = []
    answered = {"n": 0}

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)
        now[0] += delay

    def handler(request: httpx.Request) -> httpx.Response:
        if now[0] < 20.0:
            return httpx.Response(429, json={"error": {"message": "rate limit"}}, headers={"retry-after": "20"})
        answered["n"] += 1
        return _reply({"prompt_tokens": 5, "completion_tokens": 1})

    client = LLMClient(EndpointConfig(url=URL, model="gpt-4o", max_retries=3, backoff_max_s=2.0), name="task",
                       transport=httpx.MockTransport(handler), sleep=fake_sleep, rng=random.Random(1),
                       monotonic=lambda: now[0])
    async with client:
        first = await client.chat(MESSAGES, stage="propose")
        assert first.retries == 1 and sleeps == [20.0]
        client._hold_until = now[0] + 5.0  # a limit another request just hit: this one waits, then goes
        second = await client.chat(MESSAGES, stage="propose")
    assert second.retries == 0
    assert sleeps == [20.0, 5.0]
    assert answered["n"] == 2


async def test_a_v7_database_gains_the_cached_tokens_column_in_place(tmp_path: Path):
    db = database_at(tmp_path / "v7.db", 7, (
        "INSERT INTO runs (run_id, task, status, created_at, updated_at) VALUES ('r1', 't', 'done', 1, 1)",
        "INSERT INTO llm_calls (run_id, endpoint, status, prompt_tokens, created_at) VALUES ('r1', 'task', 'ok', 9, 1)"))
    store = await Store.open(db, create=False)
    try:
        assert await store.schema_version() == 9
        rows = await store.fetch_rows("llm_calls", "r1")
    finally:
        await store.close()
    assert rows[0]["prompt_tokens"] == 9 and rows[0]["cached_tokens"] == 0


async def test_paced_429s_do_not_use_up_the_retries_of_a_call():
    """A per-minute limit answering 429 with its wait six times in a row (max_retries 2) paces
    the call, it does not fail it; a 429 without a stated wait still counts as a failure."""
    replies = iter([httpx.Response(429, headers={"retry-after": "0.5"}) for _ in range(6)] +
                   [_reply({"prompt_tokens": 5, "completion_tokens": 1})])
    sleeps: list[float] = []

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)

    client = LLMClient(EndpointConfig(url=URL, model="gpt-4o", max_retries=2), name="task",
                       transport=httpx.MockTransport(lambda r: next(replies)), sleep=fake_sleep)
    async with client:
        res = await client.chat(MESSAGES, stage="propose")
    assert res.retries == 6 and sleeps == [0.5] * 6
    bare = iter([httpx.Response(429) for _ in range(3)])
    client = LLMClient(EndpointConfig(url=URL, model="gpt-4o", max_retries=2), name="task",
                       transport=httpx.MockTransport(lambda r: next(bare)), sleep=fake_sleep, rng=random.Random(0))
    async with client:
        with pytest.raises(Exception, match="gave up after 2 retries"):
            await client.chat(MESSAGES, stage="propose")
