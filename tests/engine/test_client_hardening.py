"""Client behaviour learnt from real servers: context overflow -> shrink and retry once,
first-token and total timeouts, slots from llama.cpp's /props, servers that ignore `model`;
and the --llm local plumbing that needs no model (config, flags, bad model paths)."""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx
import pytest

from engine.config import LOCAL_URL, EndpointConfig, build_config
from engine.llm.client import LLMClient
from engine.llm.errors import LLMError
from engine.llm.local import LocalServerError, resolve_model
from engine.llm.shrink import middle_out
from evotui import options

URL = "http://127.0.0.1:9/v1"
OVERFLOW = {"error": {"code": 400, "message": "request (3000 tokens) exceeds the available context size (1000 tokens), "
                      "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 3000, "n_ctx": 1000}}


def make(handler, records=None, **cfg) -> LLMClient:
    settings = dict(url=URL, model="m1", max_retries=0) | cfg
    return LLMClient(EndpointConfig(**settings), name="task", transport=httpx.MockTransport(handler),
                     on_call=(records.append if records is not None else None))


def ok(text="fine", usage=None):
    return httpx.Response(200, json={"choices": [{"index": 0, "message": {"content": text}, "finish_reason": "stop"}],
                                     "usage": usage or {"prompt_tokens": 5, "completion_tokens": 1}})


def _long_messages():
    return [{"role": "system", "content": "SYSTEM"},
            {"role": "user", "content": "HEAD " + "x" * 12000 + " TAIL: answer in a block"}]


async def test_overflow_shrinks_with_the_callers_rule_and_retries_once():
    sizes, records = [], []

    def handler(request):
        body = json.loads(request.content)
        size = sum(len(m["content"]) for m in body["messages"])
        sizes.append(size)
        return httpx.Response(400, json=OVERFLOW) if size > 4000 else ok()

    c = make(handler, records)
    res = await c.chat(_long_messages(), stage="propose", shrink=middle_out)
    assert res.shrunk and res.text == "fine" and len(sizes) == 2 and sizes[1] < 4000
    assert len(records) == 1 and records[0].status == "ok" and records[0].retries == 1  # one call, one record
    await c.aclose()


async def test_overflow_still_too_long_or_without_rule_fails_the_call_not_the_run():
    c = make(lambda r: httpx.Response(400, json=OVERFLOW))
    with pytest.raises(LLMError) as info:
        await c.chat(_long_messages(), stage="propose")
    assert info.value.kind == "context_overflow" and not info.value.fatal
    assert (info.value.prompt_tokens, info.value.context_tokens) == (3000, 1000)
    with pytest.raises(LLMError) as info:
        await c.chat(_long_messages(), stage="propose", shrink=middle_out)
    assert "still too long after shrinking" in str(info.value) and c.shrunk == 1
    await c.aclose()


def test_middle_out_keeps_head_and_tail_and_scales_to_the_reported_context():
    err = LLMError("context_overflow", "x")
    err.prompt_tokens, err.context_tokens = 3000, 1000
    out = middle_out(_long_messages(), err)
    user = out[1]["content"]
    assert user.startswith("HEAD ") and user.endswith("TAIL: answer in a block") and "characters cut" in user
    assert len(user) < 0.3 * len(_long_messages()[1]["content"]) and out[0]["content"] == "SYSTEM"
    assert middle_out([{"role": "user", "content": "short"}], err) is None  # nothing left to cut


async def test_first_token_timeout_is_separate_from_read_and_total():
    async def slow_stream(request):
        async def body():
            await asyncio.sleep(0.5)
            yield b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
            yield b"data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    c = make(slow_stream, stream=True, first_token_timeout_s=0.1)
    with pytest.raises(LLMError) as info:
        await c.chat(_long_messages(), stage="rollout")
    assert info.value.kind == "timeout" and "first_token_timeout_s=0.1s" in str(info.value)
    patient = make(slow_stream, stream=True, first_token_timeout_s=2.0)
    assert (await patient.chat(_long_messages(), stage="rollout")).text == "hi"
    capped = make(slow_stream, stream=True, total_timeout_s=0.1)
    with pytest.raises(LLMError) as info:
        await capped.chat(_long_messages(), stage="rollout")
    assert "total_timeout_s=0.1s" in str(info.value)
    for client in (c, patient, capped):
        await client.aclose()


async def test_check_caps_concurrency_to_llamacpp_slots_and_accepts_any_model_name():
    def handler(request):
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "smollm2", "owned_by": "llamacpp", "aliases": ["local"]}]})
        if request.url.path == "/props":
            return httpx.Response(200, json={"total_slots": 3})
        return ok()

    c = make(handler, model="whatever", max_concurrency=64)
    await c.check()
    assert c.slots == 3 and c._sem._value == 3
    other = make(lambda r: httpx.Response(200, json={"data": [{"id": "qwen"}]}) if r.url.path == "/v1/models"
                 else httpx.Response(404), model="qwen", max_concurrency=8)
    await other.check()
    assert other.slots is None and other._sem._value == 8
    await c.aclose()
    await other.aclose()


def test_local_url_and_local_table_validate():
    cfg = build_config([("t", {"task_llm": {"url": "local://"}, "local": {"parallel": 2, "ctx": 512}})])
    assert cfg.uses_local and not cfg.uses_sim and cfg.task_llm.url == LOCAL_URL and cfg.local.parallel == 2


def _args(**kw):
    base = dict(config=None, llm_url=None, model=None, api_key_env=None, stream=None, profile=None, time_scale=None,
                mode=None, policy=None, max_gap=None, minibatch=None, max_in_flight=None, seed=None, workers=None,
                reflection_url=None, reflection_model=None, llm=None, llm_model_path=None)
    return argparse.Namespace(**(base | kw))


def test_llm_local_flags_become_config_layers(tmp_path):
    model = tmp_path / "m.gguf"
    layers = options.config_layers(_args(llm="local", llm_model_path=str(model)))
    cfg = build_config(layers)
    assert cfg.task_llm.url == LOCAL_URL and cfg.task_llm.model == "local" and cfg.task_llm.max_tokens == 512
    assert cfg.local.model_path == str(model.resolve())
    with pytest.raises(Exception, match="exclude each other"):
        options.config_layers(_args(llm="local", llm_url="http://127.0.0.1:8000/v1"))
    with pytest.raises(Exception, match="needs --llm local"):
        options.config_layers(_args(llm_model_path=str(model)))


def test_bad_model_paths_are_one_line_input_errors(tmp_path):
    with pytest.raises(LocalServerError, match="not found") as info:
        resolve_model(str(tmp_path / "missing.gguf"))
    assert info.value.exit_code == 2
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(LocalServerError, match="is not a GGUF file"):
        resolve_model(str(junk))


# -- credentials in the URL: sent, never shown ----------------------------------------------------

SECRET = "s3cr3t-KEY-9876"


def _shown(client: LLMClient, records: list, err: LLMError) -> list[str]:
    """Everything the client lets out: its URL and repr, the call records, the error in every form."""
    return [client.base_url, repr(client), repr(records), str(err), repr(err), repr(err.args), repr(vars(err))]


async def test_userinfo_in_the_url_is_sent_as_basic_auth():
    seen = []
    c = make(lambda r: seen.append(r) or ok(), url=f"http://alice:{SECRET}@127.0.0.1:9/v1/")
    await c.chat([{"role": "user", "content": "hi"}], stage="propose")
    (req,) = seen
    assert req.headers["authorization"] == httpx.BasicAuth("alice", SECRET)._auth_header
    assert SECRET not in str(req.url) and req.url.path == "/v1/chat/completions"  # no URL for httpx to echo
    await c.aclose()


async def test_userinfo_in_the_url_is_never_shown():
    seen, records = [], []

    def handler(request):
        seen.append(request)
        # httpx-style text naming the full URL, as exceptions and proxies do
        raise httpx.ConnectError(f"failed to reach http://alice:{SECRET}@127.0.0.1:9/v1/chat/completions",
                                 request=request)

    c = make(handler, records, url=f"http://alice:{SECRET}@127.0.0.1:9/v1/")
    with pytest.raises(LLMError) as info:
        await c.chat([{"role": "user", "content": "hi"}], stage="propose")
    assert c.base_url == "http://127.0.0.1:9/v1" and records[0].url == c.base_url
    for text in _shown(c, records, info.value):
        assert SECRET not in text and "alice" not in text
    with pytest.raises(LLMError) as checked:
        await c.check()
    assert SECRET not in str(checked.value) and "***" in str(checked.value)
    await c.aclose()


async def test_key_in_the_query_is_sent_on_every_route_and_never_shown():
    seen, records = [], []

    def handler(request):
        seen.append(request)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m1"}]})
        body = {"error": {"message": f"upstream {request.url} is down (key {SECRET})"}}
        return httpx.Response(503, json=body)

    c = make(handler, records, url=f"https://gw.example/v1?api_key={SECRET}&region=eu")
    await c.check()
    with pytest.raises(LLMError) as info:
        await c.chat([{"role": "user", "content": "hi"}], stage="propose")
    assert [(r.url.path, r.url.params.get("api_key")) for r in seen] == [
        ("/v1/models", SECRET), ("/props", SECRET), ("/v1/chat/completions", SECRET)]
    assert c.base_url == "https://gw.example/v1?api_key=***&region=eu"
    assert info.value.kind == "server" and "api_key=***" in str(info.value)
    for text in _shown(c, records, info.value):
        assert SECRET not in text
    await c.aclose()


async def test_an_api_key_wins_over_url_userinfo(monkeypatch):
    monkeypatch.setenv("EVOTUI_TEST_KEY", "sk-env-key")
    seen = []
    c = make(lambda r: seen.append(r) or ok(), url=f"http://alice:{SECRET}@127.0.0.1:9/v1",
             api_key_env="EVOTUI_TEST_KEY")
    await c.chat([{"role": "user", "content": "hi"}], stage="propose")
    assert seen[0].headers["authorization"] == "Bearer sk-env-key"
    await c.aclose()


async def test_refused_url_credentials_say_where_to_look_and_stay_hidden():
    def handler(request):
        echo = f"{request.headers['authorization']} for {request.url} rejected"  # a server echoing it all
        return httpx.Response(401, json={"error": {"message": echo}})

    c = make(handler, url=f"http://alice:{SECRET}@127.0.0.1:9/v1")
    with pytest.raises(LLMError) as info:
        await c.chat([{"role": "user", "content": "hi"}], stage="propose")
    err = info.value
    token = httpx.BasicAuth("alice", SECRET)._auth_header.split()[1]
    assert (err.kind, err.fatal) == ("auth", True) and "check the user and password in the URL" in str(err)
    assert SECRET not in str(err) and token not in str(err) and "Basic ***" in str(err)
    await c.aclose()


def test_an_invalid_url_is_a_fatal_error_that_hides_its_credentials():
    with pytest.raises(LLMError) as info:
        make(lambda r: ok(), url=f"http://alice:{SECRET}@host:notaport/v1")
    assert (info.value.kind, info.value.fatal) == ("connect", True)
    assert SECRET not in str(info.value) and "Invalid port" in str(info.value)
