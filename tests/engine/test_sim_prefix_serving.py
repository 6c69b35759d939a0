"""Prefix caching in the vllm profile's time model (exact, with a manual clock), and the app's
hook that gives each request its prompt's blocks."""

from __future__ import annotations

import httpx
import pytest

from engine.config import SimConfig
from engine.llm.sim import sim_transport
from engine.llm.sim.clock import ManualClock
from engine.llm.sim.prefix_cache import BLOCK_TOKENS, prompt_blocks
from engine.llm.sim.serving import Job, VllmServer

PREFILL = 1000.0  # tok/s: a 2000-token prompt takes 2 s


def server(**fields) -> tuple[ManualClock, VllmServer]:
    clock = ManualClock()
    return clock, VllmServer(SimConfig(vllm_prefill_tok_s=PREFILL, **fields), clock)


def messages(user: str = "Category: fruit\nItems: apple, pear") -> list[dict]:
    # 6000 + 2000 characters of content: 2000 prompt tokens at 4 characters each
    return [{"role": "system", "content": "S" * 6000}, {"role": "user", "content": (user * 2000)[:2000]}]


def job(msgs: list[dict]) -> Job:
    tokens = sum(len(m["content"]) for m in msgs) // 4
    return Job(prompt_tokens=tokens, tokens=50, blocks=prompt_blocks(msgs))


def ttft(j: Job) -> float:
    return j.first_token - j.arrival


async def test_a_repeated_prompt_prefills_only_its_uncached_tail():
    clock, srv = server()
    first = srv.submit(job(messages()))
    clock.advance()
    second = srv.submit(job(messages()))
    clock.advance()
    assert ttft(first) == pytest.approx(2000 / PREFILL)
    # 8022 characters of chat text make 125 blocks; the last token is always computed, so
    # (2000 - 1) // 16 = 124 blocks are reused and 2000 - 1984 = 16 tokens prefilled.
    cached = 124 * BLOCK_TOKENS
    assert second.cached_tokens == cached
    assert ttft(first) - ttft(second) == pytest.approx(cached / PREFILL)
    assert srv.kv_figures()["prefix_cached_tokens"] == cached
    assert srv.kv_figures()["prefilled_tokens"] == 2000 + 2000 - cached


async def test_with_prefix_caching_off_every_prompt_is_prefilled_in_full():
    clock, srv = server(vllm_prefix_caching=False)
    first = srv.submit(job(messages()))
    clock.advance()
    second = srv.submit(job(messages()))
    clock.advance()
    assert ttft(second) == pytest.approx(ttft(first)) == pytest.approx(2000 / PREFILL)
    assert srv.prefix_cache is None and srv.kv_figures()["prefix_cached_tokens"] == 0


async def test_a_shared_system_prompt_saves_its_blocks_only():
    clock, srv = server()
    srv.submit(job(messages("Category: fruit\n")))
    clock.advance()
    other = srv.submit(job(messages("Category: tools\n")))
    clock.advance()
    # "<|system|>\n" + 6000 + "\n" + "<|user|>\n" = 6021 characters agree: 94 full blocks
    assert other.cached_tokens == 94 * BLOCK_TOKENS
    assert ttft(other) == pytest.approx((2000 - 94 * BLOCK_TOKENS) / PREFILL)


async def test_blocks_enter_the_cache_when_their_prefill_ends():
    # Admitted together, the second is admitted before the first's prompt is computed: no reuse
    # (as two requests scheduled in the same step of vLLM both compute their prompts).
    clock, srv = server()
    a, b = srv.submit(job(messages())), srv.submit(job(messages()))
    clock.advance()
    assert a.cached_tokens == b.cached_tokens == 0
    assert b.first_token == pytest.approx(2 * 2000 / PREFILL)


async def test_a_preempted_request_reuses_its_own_prompt_blocks_on_readmission():
    clock, srv = server(vllm_kv_cache_tokens=1000)
    jobs = [Job(prompt_tokens=320, tokens=300, blocks=prompt_blocks([{"role": "user", "content": c * 1280}]))
            for c in "xy"]
    for j in jobs:
        srv.submit(j)
    clock.advance()
    assert jobs[1].preemptions == 1 and jobs[0].preemptions == 0
    # 1290 characters of chat text: 20 blocks = the whole 320-token prompt; the output decoded
    # before the preemption is prefilled again
    assert jobs[1].cached_tokens == 20 * BLOCK_TOKENS
    assert srv.prefix_cached_tokens == 320
    assert all(j.finish is not None for j in jobs)


async def test_the_cache_is_bounded_by_the_kv_cache_blocks():
    _, srv = server(vllm_kv_cache_tokens=1000)
    assert srv.prefix_cache.capacity_blocks == 1000 // BLOCK_TOKENS
    _, unbounded = server(vllm_kv_cache_tokens=None)
    assert unbounded.prefix_cache.capacity_blocks is None


@pytest.mark.parametrize("caching", [True, False])
async def test_the_app_hands_each_request_its_blocks(caching: bool):
    transport, state = sim_transport(SimConfig(time_scale=1e6, vllm_prefix_caching=caching))
    body = {"model": "m", "max_tokens": 4, "messages": messages()}
    async with httpx.AsyncClient(transport=transport, base_url="http://sim/v1") as http:
        for _ in range(2):  # one after the other: the second finds the first's blocks
            assert (await http.post("/chat/completions", json=body)).status_code == 200
        metrics = (await http.get("/sim/metrics")).json()
    assert metrics["prefix_caching"] is caching
    assert metrics["prefix_cached_tokens"] == (124 * BLOCK_TOKENS if caching else 0)
    assert metrics["prefilled_tokens"] == 4000 - metrics["prefix_cached_tokens"]
