"""LLMClient against httpx.MockTransport handlers; backoff sleeps go to a fake clock."""

from __future__ import annotations

import asyncio
import json
import random
import socket

import httpx
import pytest

from engine.config import EndpointConfig
from engine.llm.client import CallRecord, ChatResult, LLMClient
from engine.llm.errors import LLMError, parse_retry_after

URL = "http://127.0.0.1:9/v1"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]


class MaxRng(random.Random):
    """Full jitter always picks the upper bound, so the capped schedule is exact."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Harness:
    def __init__(self, handler, *, rng: random.Random | None = None, transport=..., **cfg) -> None:
        self.sleeps: list[float] = []
        self.records: list[CallRecord] = []
        self.requests: list[httpx.Request] = []

        async def wrapped(request: httpx.Request):
            self.requests.append(request)
            result = handler(request)
            return await result if asyncio.iscoroutine(result) else result

        async def fake_sleep(delay: float) -> None:
            self.sleeps.append(delay)

        settings = dict(url=URL, model="m1", max_retries=3, backoff_base_s=0.5, backoff_max_s=2.0) | cfg
        self.client = LLMClient(
            EndpointConfig(**settings), name="task",
            transport=httpx.MockTransport(wrapped) if transport is ... else transport,
            on_call=self.records.append, sleep=fake_sleep, rng=rng or random.Random(7),
        )

    async def chat(self, **kw) -> ChatResult:
        return await self.client.chat(MESSAGES, stage=kw.pop("stage", "rollout"), **kw)

    async def failing_chat(self, **kw) -> LLMError:
        with pytest.raises(LLMError) as info:
            await self.chat(**kw)
        return info.value


def completion(text: str = "hi", finish: str = "stop", usage: dict | None = None) -> httpx.Response:
    body = {"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return httpx.Response(200, json=body)


def sse(*events: str) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content="".join(events).encode())


def chunk(content: str | None = None, finish: str | None = None, usage: dict | None = None) -> str:
    choices = [] if content is None and finish is None else [
        {"index": 0, "delta": {"content": content} if content is not None else {}, "finish_reason": finish}]
    return "data: " + json.dumps({"choices": choices, "usage": usage}) + "\n\n"


async def test_non_streaming_success_uses_reported_usage():
    h = Harness(lambda r: completion("Hello there.", usage={"prompt_tokens": 21, "completion_tokens": 4}))
    res = await h.chat(stage="propose", seed=5, max_tokens=64)
    assert res == ChatResult("Hello there.", "stop", 21, 4, res.latency_s, 0)
    req = h.requests[0]
    assert req.url == httpx.URL(URL + "/chat/completions") and req.headers["X-Evotui-Stage"] == "propose"
    assert "authorization" not in req.headers
    body = json.loads(req.content)
    assert body == {"model": "m1", "messages": MESSAGES, "max_tokens": 64, "temperature": 0.7,
                    "stream": False, "seed": 5}
    (rec,) = h.records
    assert (rec.status, rec.endpoint, rec.url, rec.model, rec.stage) == ("ok", "task", URL, "m1", "propose")
    assert (rec.prompt_tokens, rec.completion_tokens, rec.retries, rec.error, rec.ttft_s) == (21, 4, 0, None, None)
    assert rec.latency_s == res.latency_s >= 0
    assert (h.client.calls, h.client.errors, h.client.in_flight) == (1, 0, 0)


async def test_missing_usage_is_estimated_from_characters():
    h = Harness(lambda r: completion("abcdefghi"))
    res = await h.chat()
    prompt_chars = sum(len(m["content"]) for m in MESSAGES)
    assert (res.prompt_tokens, res.completion_tokens) == (-(-prompt_chars // 4), 3)


async def test_streaming_accumulates_deltas_and_takes_usage_from_final_chunk():
    body = sse(": keep-alive\n\n", chunk("Hel"), "event: message\n", chunk("lo"), chunk(None, "stop"),
               chunk(usage={"prompt_tokens": 9, "completion_tokens": 2}), "data: [DONE]\n\n",
               "data: not json after done\n\n")
    h = Harness(lambda r: body, stream=True)
    res = await h.chat(stage="evaluate")
    assert (res.text, res.finish_reason, res.prompt_tokens, res.completion_tokens) == ("Hello", "stop", 9, 2)
    sent = json.loads(h.requests[0].content)
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    (rec,) = h.records
    assert rec.status == "ok" and rec.ttft_s is not None and 0 <= rec.ttft_s <= rec.latency_s


@pytest.mark.parametrize("cut", [
    sse(chunk("partial")),  # the connection closed between chunks: no finish_reason, no [DONE]
    sse(chunk("partial"), 'data: {"choices": [{"index": 0, "del'),  # ... or in the middle of one
    sse(": keep-alive\n\n"),  # ... or before the first chunk
], ids=["between-chunks", "mid-chunk", "before-any-chunk"])
async def test_truncated_stream_is_retried(cut):
    replies = iter([cut, sse(chunk("whole"), chunk(None, "stop"), "data: [DONE]\n\n")])
    h = Harness(lambda r: next(replies), stream=True)
    res = await h.chat()
    assert (res.text, res.retries, len(h.requests), len(h.sleeps)) == ("whole", 1, 2, 1)
    (rec,) = h.records
    assert (rec.status, rec.retries) == ("ok", 1) and h.client.retries == 1


async def test_stream_cut_every_time_gives_up_without_failing_the_run():
    h = Harness(lambda r: sse(chunk("partial")), stream=True, max_retries=2)
    err = await h.failing_chat()
    assert (err.kind, err.fatal, err.retries) == ("truncated_stream", False, 2)
    assert "cut short" in str(err) and "before [DONE]" in str(err) and "gave up after 2 retries" in str(err)
    assert len(h.requests) == 3 and len(h.sleeps) == 2
    assert (h.records[0].status, h.records[0].error) == ("error", str(err))


async def test_stream_cut_inside_a_chunk_is_truncated_but_garbage_mid_stream_is_a_bad_response():
    cut = Harness(lambda r: sse(chunk("partial"), 'data: {"choices": [{"ind'), stream=True, max_retries=0)
    err = await cut.failing_chat()
    assert err.kind == "truncated_stream" and "cut inside a chunk" in str(err)
    garbage = Harness(lambda r: sse("data: <oops>\n\n", chunk("x", "stop"), "data: [DONE]\n\n"), stream=True,
                      max_retries=1)
    err = await garbage.failing_chat()
    assert (err.kind, err.fatal, len(garbage.requests)) == ("bad_response", False, 2)
    assert "stream chunk is not JSON ('<oops>')" in str(err)


async def test_stream_with_finish_reason_but_no_done_is_complete():
    h = Harness(lambda r: sse(chunk("all"), chunk(None, "stop")), stream=True)
    assert (await h.chat()).text == "all" and len(h.requests) == 1


async def test_429_is_retried_honouring_capped_retry_after():
    replies = iter([httpx.Response(429, headers={"Retry-After": "300"}, json={"error": {"message": "slow down"}}),
                    httpx.Response(429, headers={"Retry-After": "0.25"}),
                    completion("ok", usage={"prompt_tokens": 1, "completion_tokens": 1})])
    h = Harness(lambda r: next(replies))
    res = await h.chat()
    assert res.text == "ok" and res.retries == 2
    assert h.sleeps == [120.0, 0.25]  # the server's wait, up to RETRY_AFTER_MAX_S (not backoff_max_s)
    assert h.records[0].retries == 2 and h.client.retries == 2 and len(h.records) == 1


async def test_5xx_exhausts_retries_with_capped_exponential_backoff():
    h = Harness(lambda r: httpx.Response(503, text="overloaded"), rng=MaxRng(), backoff_base_s=1.0,
                backoff_max_s=1.5, max_retries=3)
    err = await h.failing_chat()
    assert (err.kind, err.fatal, err.status, err.retries) == ("server", False, 503, 3)
    assert "HTTP 503: overloaded" in str(err) and "gave up after 3 retries" in str(err)
    assert len(h.requests) == 4 and h.sleeps == [1.0, 1.5, 1.5]
    (rec,) = h.records
    assert (rec.status, rec.retries, rec.error) == ("error", 3, str(err))
    assert (h.client.calls, h.client.errors, h.client.retries) == (1, 1, 3)


async def test_jittered_backoff_stays_within_bounds():
    h = Harness(lambda r: httpx.Response(500), rng=random.Random(3), max_retries=4)
    await h.failing_chat()
    assert len(h.sleeps) == 4
    assert all(0 <= d <= min(2.0, 0.5 * 2**i) for i, d in enumerate(h.sleeps))


async def test_connect_errors_are_retried_then_fatal():
    def refuse(request):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    h = Harness(refuse, max_retries=2)
    err = await h.failing_chat()
    assert (err.kind, err.fatal, err.retries) == ("connect", True, 2)
    assert str(err).startswith(f"cannot reach {URL} ([Errno 111] Connection refused); start the server")
    assert len(h.requests) == 3 and len(h.sleeps) == 2 and h.records[0].status == "error"
    assert err.__cause__ is None and err.__context__ is None


async def test_read_timeout_is_retried_and_not_fatal():
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    h = Harness(slow, max_retries=1)
    err = await h.failing_chat()
    assert (err.kind, err.fatal, len(h.requests)) == ("timeout", False, 2)


@pytest.mark.parametrize(("status", "body", "kind", "fatal", "needle"), [
    (404, {"error": {"message": "The model `m1` does not exist."}}, "model_not_found", True, "model 'm1' not found"),
    (401, {"error": {"message": "Invalid API key"}}, "auth", True, "refused the credentials (HTTP 401"),
    (403, {"detail": "forbidden"}, "auth", True, "HTTP 403: forbidden"),
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens"}},
     "context_overflow", False, "prompt too long for model 'm1'"),
    (400, {"error": {"message": "temperature must be <= 2"}}, "bad_request", True, "temperature must be <= 2"),
])
async def test_client_errors_are_not_retried(status, body, kind, fatal, needle):
    h = Harness(lambda r: httpx.Response(status, json=body))
    err = await h.failing_chat()
    assert (err.kind, err.fatal, err.status) == (kind, fatal, status)
    assert needle in str(err) and "\n" not in str(err)
    assert len(h.requests) == 1 and h.sleeps == [] and len(h.records) == 1


BAD_200 = [
    (lambda: httpx.Response(200, text='{"choices": [{"index": 0, "message": {"content": "cut'), "cut short"),
    (lambda: httpx.Response(200, text="<html>hello</html>"), "HTML page"),
    (lambda: httpx.Response(200, headers={"content-type": "text/html"}, text="Bad gateway, try later"), "HTML page"),
    (lambda: httpx.Response(200, text=""), "empty body"),
    (lambda: httpx.Response(200, json={"object": "chat.completion"}), "no choices"),
    (lambda: httpx.Response(200, json={"object": "chat.completion", "choices": []}), "no choices"),
    (lambda: httpx.Response(200, json={"error": {"message": "upstream overloaded"}}), "upstream overloaded"),
]
BAD_200_IDS = ["truncated-json", "html", "html-content-type", "empty", "no-choices", "empty-choices", "error-200"]


@pytest.mark.parametrize(("response", "needle"), BAD_200, ids=BAD_200_IDS)
async def test_transient_bad_success_bodies_are_retried(response, needle):
    replies = iter([response(), completion("fine")])
    h = Harness(lambda r: next(replies))
    res = await h.chat()
    assert (res.text, res.retries, len(h.requests), len(h.sleeps)) == ("fine", 1, 2, 1)
    assert [r.status for r in h.records] == ["ok"] and h.client.retries == 1


@pytest.mark.parametrize(("response", "needle"), BAD_200, ids=BAD_200_IDS)
async def test_bad_success_bodies_give_up_as_a_failed_call_not_a_failed_run(response, needle):
    h = Harness(lambda r: response(), max_retries=2)
    err = await h.failing_chat()
    assert (err.kind, err.fatal, err.retries) == ("bad_response", False, 2)
    assert needle in str(err) and "gave up after 2 retries" in str(err) and "\n" not in str(err)
    assert len(h.requests) == 3 and len(h.sleeps) == 2 and h.records[0].status == "error"


async def test_streaming_request_answered_by_an_html_page_is_retried():
    page = httpx.Response(200, headers={"content-type": "text/html; charset=utf-8"}, text="<h1>502</h1>")
    replies = iter([page, sse(chunk("ok"), chunk(None, "stop"), "data: [DONE]\n\n")])
    h = Harness(lambda r: next(replies), stream=True)
    assert (await h.chat()).text == "ok" and len(h.requests) == 2


async def test_a_well_formed_reply_of_the_wrong_shape_is_not_retried():
    body = {"choices": [{"index": 0, "message": {"content": ["not", "text"]}, "finish_reason": "stop"}]}
    h = Harness(lambda r: httpx.Response(200, json=body))
    err = await h.failing_chat()
    assert (err.kind, err.fatal, len(h.requests)) == ("bad_response", False, 1)


async def test_finish_reason_length_is_returned_not_raised():
    h = Harness(lambda r: completion("cut of", finish="length", usage={"prompt_tokens": 5, "completion_tokens": 8}))
    res = await h.chat(max_tokens=8)
    assert res.finish_reason == "length" and res.text == "cut of"
    (rec,) = h.records
    assert (rec.status, rec.finish_reason, rec.error) == ("length", "length", None)


async def test_on_call_fires_exactly_once_per_chat():
    replies = iter([completion("a"), httpx.Response(500), httpx.Response(500), completion("b"),
                    httpx.Response(401), completion("c", finish="length")])
    h = Harness(lambda r: next(replies), max_retries=3)
    outcomes = []
    for _ in range(4):
        try:
            outcomes.append((await h.chat()).text)
        except LLMError as exc:
            outcomes.append(exc.kind)
    assert outcomes == ["a", "b", "auth", "c"]
    assert [r.status for r in h.records] == ["ok", "ok", "error", "length"]
    assert [r.retries for r in h.records] == [0, 2, 0, 0]
    assert (h.client.calls, h.client.errors, h.client.retries) == (4, 1, 2)


async def test_semaphore_bounds_concurrent_requests():
    active = peak = 0
    release = asyncio.Event()

    async def handler(request):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await release.wait()
        active -= 1
        return completion("x")

    h = Harness(handler, max_concurrency=2)
    tasks = [asyncio.create_task(h.chat()) for _ in range(5)]
    for _ in range(50):  # let every task run as far as it can
        await asyncio.sleep(0)
    assert active == 2 and h.client.in_flight == 2
    release.set()
    results = await asyncio.gather(*tasks)
    assert peak == 2 and len(results) == 5 and h.client.in_flight == 0 and len(h.records) == 5


async def test_api_key_never_leaks(monkeypatch):
    secret = "sk-test-SECRET-4242"
    monkeypatch.setenv("EVOTUI_TEST_KEY", secret)

    def leaky(request):
        assert request.headers["authorization"] == f"Bearer {secret}"
        raise httpx.ConnectError(f"proxy said: bad token {secret}", request=request)

    h = Harness(leaky, api_key_env="EVOTUI_TEST_KEY", max_retries=1)
    err = await h.failing_chat()
    echo = Harness(lambda r: httpx.Response(401, json={"error": {"message": f"key {secret} revoked"}}),
                   api_key_env="EVOTUI_TEST_KEY")
    err401 = await echo.failing_chat()
    with pytest.raises(LLMError) as checked:
        await echo.client.check()
    for text in (str(err), repr(err), str(err401), repr(err401), str(checked.value), repr(h.records),
                 repr(echo.records), repr(h.client), repr(vars(err)), repr(err.args)):
        assert secret not in text
    assert "***" in str(err) and "***" in str(err401) and "$EVOTUI_TEST_KEY" in str(err401)


async def test_check_accepts_listed_model_and_servers_without_models_route():
    listed = Harness(lambda r: httpx.Response(200, json={"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}))
    await listed.client.check()
    assert listed.requests[0].url == httpx.URL(URL + "/models")
    missing_route = Harness(lambda r: httpx.Response(404, text="Not Found"))
    await missing_route.client.check()
    assert listed.records == [] and listed.client.calls == 0


async def test_check_warns_with_the_available_models_when_ours_is_not_listed():
    """A name the server does not list is a warning: the first request decides (a proxy or an
    OpenRouter-style server routes names it does not list)."""
    h = Harness(lambda r: httpx.Response(200, json={"data": [{"id": "qwen3-8b"}, {"id": "llama-3"}]}), model="gpt-x")
    await h.client.check()
    assert h.client.notices == [f"model 'gpt-x' is not listed at {URL} (available: qwen3-8b, llama-3); sending it "
                                "anyway, the server decides (pass --model with one of them if it refuses)"]


async def test_check_on_unreachable_server_reports_connect_error():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    h = Harness(None, transport=None, url=url, connect_timeout_s=2.0)
    with pytest.raises(LLMError) as info:
        await h.client.check()
    err = info.value
    assert (err.kind, err.fatal) == ("connect", True)
    assert str(err).startswith(f"cannot reach {url} (") and str(err).endswith("start the server or fix --llm-url")
    await h.client.aclose()


def test_error_strings_are_one_line_and_retry_after_parses():
    err = LLMError("server", "boom\n  on two\tlines", status=500)
    assert str(err) == "boom on two lines" and "kind='server'" in repr(err)
    with pytest.raises(ValueError):
        LLMError("nope", "x")
    assert parse_retry_after("3") == 3.0 and parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0 and parse_retry_after("soon") is None


def test_sim_url_needs_a_transport():
    with pytest.raises(ValueError):
        LLMClient(EndpointConfig(), name="task")
    client = LLMClient(EndpointConfig(), name="task", transport=httpx.MockTransport(lambda r: completion()))
    assert client.base_url == "http://sim/v1"


async def test_a_cancelled_call_is_counted_and_recorded_once():
    """A request cancelled mid-flight (a stop, or a chain step already decided) counts as a call
    of its endpoint, as its llm_calls row does, so the endpoint's figures add up to the run's."""
    started = asyncio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    h = Harness(never_answers)
    task = asyncio.create_task(h.chat(stage="validate"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (rec,) = h.records
    assert (rec.status, rec.stage, rec.url, rec.completion_tokens) == ("cancelled", "validate", URL, 0)
    assert rec.error is not None and rec.error.startswith("cancelled")
    assert (h.client.calls, h.client.errors, h.client.in_flight) == (1, 0, 0)
