"""The simulated OpenAI-compatible app, in-process (ASGITransport) and under uvicorn."""

from __future__ import annotations

import asyncio
import json
import math
import socket

import httpx
import pytest
import uvicorn

from engine.config import LengthDist, SimConfig
from engine.llm.sim import create_sim_app, sim_transport
from engine.llm.sim.plugins import SimRequest
from engine.llm.sim.clock import ManualClock
from engine.tasks.ruleworld import RULES, generate_examples, score
from engine.tasks.sim_behaviours import all_behaviours

BASE = "http://sim/v1"


def fixed(median: int) -> dict[str, LengthDist]:
    """Every request this long (a request without a stage header gets the lengths of the stage
    its content implies: a plain question is a rollout)."""
    one = LengthDist(median=median, sigma=0, max=100_000)
    return {"default": one, "rollout": one}


def chat(content: str, system: str | None = None, **extra) -> dict:
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    return {"model": "sim-qwen3-8b", "messages": msgs, **extra}


async def test_models_health_and_errors() -> None:
    transport, state = sim_transport(SimConfig())
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        models = (await c.get("/models")).json()
        assert models["object"] == "list" and models["data"][0]["id"] == "sim-qwen3-8b"
        assert (await c.get("http://sim/health")).json()["status"] == "ok"
        bad = await c.post("/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and "JSON" in bad.json()["error"]["message"]
        empty = await c.post("/chat/completions", json={"messages": []})
        assert empty.status_code == 400 and "messages" in empty.json()["error"]["message"]
        neg = await c.post("/chat/completions", json=chat("hi", max_tokens=0))
        assert neg.status_code == 400
        assert (await c.get("/nowhere")).status_code == 404
        assert (await c.get("/chat/completions")).status_code == 405
    assert state.bad_requests == 3 and state.requests_served == 0


async def test_rollout_reply_shape_and_rule_following() -> None:
    transport, state = sim_transport(SimConfig(time_scale=5000), behaviours=all_behaviours())
    ex = generate_examples(11, 5, "t")[0]
    system = "\n".join(r.statement for r in RULES)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        r = await c.post("/chat/completions", json=chat(ex["input"], system, model="any-model"),
                         headers={"X-Evotui-Stage": "rollout"})
    body = r.json()
    assert r.status_code == 200 and body["system_fingerprint"] == "evotui-simulated"
    assert body["model"] == "any-model" and body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    usage = body["usage"]
    assert usage["prompt_tokens"] == math.ceil((len(system) + len(ex["input"])) / 4)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert float(r.headers["x-evotui-sim-seconds"]) > 0
    assert score(ex, choice["message"]["content"])["score"] > 0  # a real, scorable answer
    assert state.requests_served == 1 and state.completion_tokens == usage["completion_tokens"]


async def test_stream_sends_chunks_usage_and_done() -> None:
    transport, _ = sim_transport(SimConfig(time_scale=5000), behaviours=all_behaviours())
    ex = generate_examples(3, 1, "t")[0]
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        r = await c.post("/chat/completions", json=chat(ex["input"], "Sort fruit lists alphabetically.",
                                                        stream=True), headers={"X-Evotui-Stage": "rollout"})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [ln[len("data: "):] for ln in r.text.splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert text.splitlines()[0].startswith("Reasoning:")
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] > 0
    assert all(ch["system_fingerprint"] == "evotui-simulated" for ch in chunks)


async def test_length_limit_truncates_proposal() -> None:
    transport, state = sim_transport(SimConfig(time_scale=5000, lengths=fixed(500)), behaviours=all_behaviours())
    prompt = ("Current instructions:\n```\nFormat the list.\n```\nInput: ...\n"
              "Feedback: Fruit items were not in alphabetical order (A to Z).")
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        full = await c.post("/chat/completions", json=chat(prompt), headers={"X-Evotui-Stage": "propose"})
        cut = await c.post("/chat/completions", json=chat(prompt, max_tokens=100),
                           headers={"X-Evotui-Stage": "propose"})
    full_text = full.json()["choices"][0]["message"]["content"]
    assert full_text.count("```") == 2 and "alphabetical" in full_text
    body = cut.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 100
    assert body["choices"][0]["message"]["content"].count("```") < 2  # no closing fence
    assert state.truncated == 1


async def test_same_seed_same_lengths_and_answers() -> None:
    async def run(seed: int) -> list[tuple[int, str]]:
        transport, _ = sim_transport(SimConfig(seed=seed, time_scale=5000), behaviours=all_behaviours())
        out = []
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            for ex in generate_examples(5, 6, "t"):
                body = (await c.post("/chat/completions", json=chat(ex["input"], "Join with ' ; '."),
                                     headers={"X-Evotui-Stage": "rollout"})).json()
                out.append((body["usage"]["completion_tokens"], body["choices"][0]["message"]["content"]))
        return out

    first = await run(1)
    assert await run(1) == first
    assert [n for n, _ in await run(2)] != [n for n, _ in first]


class Magic:
    """A toy task plug-in: answers requests that ask for the magic word, declines the word 'pass'."""

    name = "magic"

    def __init__(self, word: str) -> None:
        self.word = word

    def recognises(self, request: SimRequest) -> bool:
        return request.kind == "task" and "magic word" in request.user

    def answer(self, request: SimRequest, rng) -> str | None:
        return None if "pass" in request.user else f"{self.word} ({request.stage})"


async def test_plugins_answer_first_in_order_and_decline_to_the_generic_model() -> None:
    async def ask(content: str, *behaviours: Magic) -> str:
        """The reply of a fresh backend (same seed, first request) with these plug-ins."""
        transport, _ = sim_transport(SimConfig(time_scale=5000), behaviours=behaviours)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            r = await c.post("/chat/completions", json=chat(content), headers={"X-Evotui-Stage": "rollout"})
        return r.json()["choices"][0]["message"]["content"]

    plugins = (Magic("abracadabra"), Magic("shazam"))
    assert await ask("Say the magic word.", *plugins) == "abracadabra (rollout)"
    assert await ask("Say the magic word.") == await ask("What is 2+2?")  # no plug-in: the generic answer
    assert await ask("magic word: pass", *plugins) == await ask("magic word: pass")  # declined: the same generic reply


async def test_api_profile_answers_429_above_cap() -> None:
    cfg = SimConfig(profile="api", api_max_concurrency=3, api_tok_s=10.0, api_ttft_s=0.1,
                    time_scale=100.0, lengths=fixed(100))  # each request: ~10 simulated s = 0.1 s wall
    transport, state = sim_transport(cfg)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        rs = await asyncio.gather(*(c.post("/chat/completions", json=chat("hi")) for _ in range(7)))
        codes = sorted(r.status_code for r in rs)
        assert codes == [200] * 3 + [429] * 4
        limited = next(r for r in rs if r.status_code == 429)
        assert limited.headers["retry-after"] == "1"
        assert limited.json()["error"]["type"] == "rate_limit_error"
        again = await c.post("/chat/completions", json=chat("hi"))
        assert again.status_code == 200
    assert state.rejected_429 == 4 and state.requests_served == 4 and state.peak_in_flight == 3


async def test_vllm_single_vs_batch_over_http_matches_formula() -> None:
    cfg = SimConfig(time_scale=100.0, vllm_prefill_tok_s=1e9, lengths=fixed(2000))
    ps = lambda b: cfg.vllm_peak_tok_s * cfg.vllm_single_seq_tok_s / (  # noqa: E731
        cfg.vllm_peak_tok_s + cfg.vllm_single_seq_tok_s * (b - 1))
    transport, state = sim_transport(cfg)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        alone = await c.post("/chat/completions", json=chat("hi"))
        batch = await asyncio.gather(*(c.post("/chat/completions", json=chat("hi")) for _ in range(32)))
    t_alone = float(alone.headers["x-evotui-sim-seconds"])
    t_batch = [float(r.headers["x-evotui-sim-seconds"]) for r in batch]
    assert t_alone == pytest.approx(2000 / ps(1), rel=0.01)
    # arrivals spread over some wall milliseconds (more on a busy machine): allow 10%
    assert sum(t_batch) / 32 == pytest.approx(2000 / ps(32), rel=0.10)
    agg_alone, agg_batch = 2000 / t_alone, 32 * 2000 / max(t_batch)
    assert agg_batch > 10 * agg_alone
    assert state.peak_running == 32 and 0 < state.utilization() <= 1


async def test_hundreds_in_flight_and_disconnect_aborts() -> None:
    clock = ManualClock()
    app = create_sim_app(SimConfig(lengths=fixed(300)), clock=clock)
    state = app.state
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        tasks = [asyncio.ensure_future(c.post("/chat/completions", json=chat(f"q{k}"))) for k in range(300)]
        while state.in_flight < 300:
            await asyncio.sleep(0)
        assert state.waiting == 300 - 256 or state.server.slots_used == 256
        clock.advance()
        rs = await asyncio.gather(*tasks)
        assert {r.status_code for r in rs} == {200}
        assert state.peak_in_flight == 300 and state.server.peak_running == 256

        lone = asyncio.ensure_future(c.post("/chat/completions", json=chat("bye")))
        while state.in_flight < 1:
            await asyncio.sleep(0)
        lone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await lone
    assert state.in_flight == 0 and state.server.aborted == 1 and state.server.slots_used == 0
    assert state.tokens_generated == 300 * 300


async def test_under_uvicorn_on_loopback() -> None:
    app = create_sim_app(SimConfig(time_scale=2000.0, lengths=fixed(200)))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1") as c:
            assert (await c.get("/models")).json()["data"][0]["id"] == "sim-qwen3-8b"
            rs = await asyncio.gather(*(c.post("/chat/completions", json=chat(f"q{k}")) for k in range(40)))
            assert all(r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 200 for r in rs)
            async with c.stream("POST", "/chat/completions", json=chat("s", stream=True)) as resp:
                lines = [ln async for ln in resp.aiter_lines() if ln.startswith("data: ")]
            assert lines[-1] == "data: [DONE]" and '"usage"' in lines[-2]
            metrics = (await c.get("/sim/metrics")).json()
            assert metrics["simulated"] is True and metrics["requests_served"] == 41
    finally:
        server.should_exit = True
        await serving
        sock.close()


def test_a_request_without_a_stage_header_gets_the_lengths_its_content_implies() -> None:
    from engine.llm.sim.answer import length_stage

    question = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"}]
    reflection = [{"role": "user", "content": "I gave an assistant these instructions:\n```\nBe brief.\n```\n"
                                              "# Example 1\n## Inputs\nx\n## Generated Outputs\ny\n## Feedback\nwrong order"}]
    assert length_stage(question, "default") == "rollout"
    assert length_stage(reflection, "default") == "propose"
    assert length_stage(question, "evaluate") == "evaluate"  # a header always wins
