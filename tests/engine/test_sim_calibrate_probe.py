"""The probe of `evotui sim-calibrate` against httpx.MockTransport servers: what it sends, what it
reads from a stream, and how it treats a server that refuses ignore_eos or is not there."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.llm.sim.calibrate_probe import Probe, ProbeError


def _sse(n_tokens: int, usage: dict | None) -> httpx.Response:
    chunks = [{"choices": [{"index": 0, "delta": {"content": f"t{i} "}}]} for i in range(n_tokens)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage})
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


def _probe(handler) -> tuple[Probe, httpx.AsyncClient]:
    probe = Probe("http://server.test/v1", "m", max_tokens=8)
    http = httpx.AsyncClient(base_url=probe.url, transport=httpx.MockTransport(handler))
    return probe, http


async def test_one_request_is_streamed_unique_and_asks_for_a_fixed_length():
    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return _sse(8, {"prompt_tokens": 31, "completion_tokens": 8})

    probe, http = _probe(handler)
    async with http:
        a = await probe.one(http, "same prompt", 1)
        await probe.one(http, "same prompt", 1)
    assert (a.prompt_tokens, a.completion_tokens) == (31, 8)
    assert 0 <= a.ttft_s <= a.latency_s
    assert bodies[0]["stream"] is True and bodies[0]["ignore_eos"] is True and bodies[0]["max_tokens"] == 8
    # A server's prefix cache must not shorten the next prefill: every prompt starts differently.
    assert bodies[0]["messages"][0]["content"] != bodies[1]["messages"][0]["content"]


async def test_without_usage_the_chunks_are_counted():
    probe, http = _probe(lambda r: _sse(5, None))
    async with http:
        assert (await probe.one(http, "x", 1)).completion_tokens == 5


async def test_a_server_refusing_ignore_eos_is_measured_without_it():
    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("ignore_eos"):
            return httpx.Response(400, json={"error": {"message": "unknown field ignore_eos"}})
        return _sse(3, {"prompt_tokens": 5, "completion_tokens": 3})

    probe, http = _probe(handler)
    async with http:
        await probe.check_ignore_eos(http)
        assert probe.ignore_eos is False
        assert (await probe.one(http, "x", 1)).completion_tokens == 3


async def test_errors_are_one_line_probe_errors():
    probe, http = _probe(lambda r: httpx.Response(401, text="bad key"))
    async with http:
        with pytest.raises(ProbeError, match="HTTP 401 to a chat request: bad key"):
            await probe.check_ignore_eos(http)

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    probe, http = _probe(down)
    async with http:
        with pytest.raises(ProbeError, match="is the server running"):
            await probe.one(http, "x", 1)
