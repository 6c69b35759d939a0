"""The api profile's tokens/requests-per-minute limits (engine/llm/sim/rate_limits.py) and the
vllm profile's shared prefill/decode compute, on the manual clock (exact, no wall time)."""

from __future__ import annotations

import pytest

from engine.config import SimConfig
from engine.llm.sim.clock import ManualClock
from engine.llm.sim.rate_limits import Bucket, OverLimit, RateLimits
from engine.llm.sim.serving import ApiServer, Job, LengthSampler, Rejected, VllmServer


def test_bucket_refills_continuously_up_to_one_minute():
    b = Bucket(600.0)  # 10 per second
    assert b.wait_for(600, now=0.0) == 0.0
    b.level -= 600
    assert b.wait_for(100, now=0.0) == pytest.approx(10.0)
    assert b.wait_for(100, now=4.0) == pytest.approx(6.0)  # 40 refilled by then
    b.refill(1000.0)
    assert b.level == 600.0  # never above a minute's allowance
    assert b.wait_for(601, now=1000.0) is None


def test_tokens_per_minute_refuses_with_the_wait_and_charges_nothing_when_refusing():
    limits = RateLimits(tokens_per_minute=6000, requests_per_minute=None)
    limits.admit(5000, now=0.0)
    with pytest.raises(OverLimit) as exc:
        limits.admit(3000, now=0.0)
    assert exc.value.retry_after_s == pytest.approx(20.0)  # 2000 missing at 100 tokens/s
    assert limits.tokens.level == pytest.approx(1000.0)  # the refused request took nothing
    limits.admit(3000, now=20.0)
    assert limits.refused == {"tokens": 1, "requests": 0}
    with pytest.raises(OverLimit, match="too large") as big:
        limits.admit(7000, now=1e6)
    assert big.value.retry_after_s is None


def test_requests_per_minute_and_the_longer_wait_wins():
    limits = RateLimits(tokens_per_minute=60_000, requests_per_minute=2)
    limits.admit(10, now=0.0)
    limits.admit(10, now=0.0)
    with pytest.raises(OverLimit, match="requests per minute") as exc:
        limits.admit(10, now=0.0)
    assert exc.value.retry_after_s == pytest.approx(30.0)
    limits.admit(10, now=30.0)


async def test_api_server_enforces_tpm_and_frees_nothing_it_did_not_take():
    cfg = SimConfig(profile="api", api_tokens_per_minute=3000, api_ttft_s=0.5, api_tok_s=100.0)
    clock = ManualClock()
    server = ApiServer(cfg, clock, LengthSampler(cfg))
    first = server.submit(Job(prompt_tokens=1000, tokens=1000))
    with pytest.raises(Rejected) as exc:
        server.submit(Job(prompt_tokens=1000, tokens=1000))
    assert exc.value.retry_after_s == pytest.approx(20.0)  # 1000 of 2000 left, 50 tokens/s
    assert server.running == 1
    clock.advance(20.0)
    second = server.submit(Job(prompt_tokens=1000, tokens=1000))
    clock.advance()
    assert first.done_fut.done() and second.done_fut.done()
    assert server.limits.refused["tokens"] == 1


async def test_api_server_without_limits_admits_up_to_the_concurrency_cap():
    cfg = SimConfig(profile="api", api_max_concurrency=2)
    server = ApiServer(cfg, ManualClock(), LengthSampler(cfg))
    server.submit(Job(10**6, 10**6))
    server.submit(Job(10**6, 10**6))
    with pytest.raises(Rejected, match="concurrent") as exc:
        server.submit(Job(1, 1))
    assert exc.value.retry_after_s is None


async def test_decoding_pauses_while_a_prompt_is_prefilled_when_compute_is_shared():
    def run(shared: bool) -> tuple[float, float]:
        cfg = SimConfig(vllm_single_seq_tok_s=10.0, vllm_peak_tok_s=1e9, vllm_prefill_tok_s=100.0,
                        vllm_prefill_shares_compute=shared, vllm_kv_cache_tokens=None)
        clock = ManualClock()
        server = VllmServer(cfg, clock)
        a = server.submit(Job(prompt_tokens=100, tokens=100))  # prefill 0-1 s, then decodes 10 s
        clock.advance(2.0)
        b = server.submit(Job(prompt_tokens=500, tokens=10))  # prefill 2-7 s
        clock.advance()
        return a.finish, b.finish

    a_alone, b_alone = run(False)
    assert a_alone == pytest.approx(11.0)
    assert b_alone == pytest.approx(7.0 + 1.0)  # b decodes at s1 beside a (no aggregate limit)
    a_shared, b_shared = run(True)
    assert a_shared == pytest.approx(11.0 + 5.0)  # a stood still for b's 5 s of prefill
    assert b_shared == pytest.approx(8.0)
