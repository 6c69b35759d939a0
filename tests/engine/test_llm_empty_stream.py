"""A streamed reply without any choice is a failed call (retried like a malformed reply), never an
empty answer; a stream whose choice carries no text is still an answer (the server said so)."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from engine.config import EndpointConfig
from engine.llm.client import LLMClient
from engine.llm.errors import LLMError

URL = "http://127.0.0.1:9/v1"
MESSAGES = [{"role": "user", "content": "Say hi."}]
USAGE = {"prompt_tokens": 7, "completion_tokens": 0}


def sse(*chunks: dict, done: bool = True) -> httpx.Response:
    text = "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + ("data: [DONE]\n\n" if done else "")
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


def choice(content: str | None, finish: str | None) -> dict:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def client(replies, records: list, sleeps: list, max_retries: int = 2) -> LLMClient:
    async def handler(request: httpx.Request) -> httpx.Response:
        return next(replies)

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)

    cfg = EndpointConfig(url=URL, model="m1", stream=True, max_retries=max_retries, backoff_base_s=0.5,
                         backoff_max_s=2.0)
    return LLMClient(cfg, name="task", transport=httpx.MockTransport(handler), on_call=records.append,
                     sleep=fake_sleep, rng=random.Random(3))


@pytest.mark.parametrize("empty", [
    sse({"choices": [], "usage": USAGE}),  # the only chunk: empty choices (a gateway's stub)
    sse({"choices": []}, {"choices": None, "usage": USAGE}),
    sse({"choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": "stop"}]}),  # never choice 0
], ids=["only-chunk-empty", "null-choices", "no-first-choice"])
async def test_stream_without_choices_is_retried_and_the_retry_answers(empty):
    records: list = []
    sleeps: list = []
    llm = client(iter([empty, sse(choice("hello", None), choice(None, "stop"))]), records, sleeps)
    res = await llm.chat(MESSAGES, stage="rollout")
    assert (res.text, res.finish_reason, res.retries) == ("hello", "stop", 1)
    assert len(sleeps) == 1
    (rec,) = records
    assert (rec.status, rec.retries) == ("ok", 1)
    await llm.aclose()


async def test_stream_without_choices_every_time_is_a_failed_call_not_an_empty_answer():
    records: list = []
    sleeps: list = []
    llm = client(iter([sse({"choices": [], "usage": USAGE})] * 3), records, sleeps, max_retries=2)
    with pytest.raises(LLMError) as info:
        await llm.chat(MESSAGES, stage="propose")
    err = info.value
    assert (err.kind, err.fatal, err.retries) == ("bad_response", False, 2)
    assert "no choices in the stream" in str(err)
    assert len(sleeps) == 2
    (rec,) = records
    assert rec.status == "error" and "no choices" in rec.error
    await llm.aclose()


async def test_stream_whose_choice_has_no_text_is_an_empty_answer():
    records: list = []
    llm = client(iter([sse(choice(None, "stop"), {"choices": [], "usage": USAGE})]), records, [])
    res = await llm.chat(MESSAGES, stage="rollout")
    assert (res.text, res.finish_reason, res.retries) == ("", "stop", 0)
    assert records[0].status == "ok"
    await llm.aclose()
