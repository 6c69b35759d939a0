"""Serving-time model of the simulator, checked against closed-form processor sharing."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from engine.config import LengthDist, SimConfig
from engine.llm.sim.clock import ManualClock, RealClock
from engine.llm.sim.serving import ApiServer, Job, LengthSampler, Rejected, VllmServer, run_job

FAST_PREFILL = 1e12  # makes prefill negligible when only decode is under test


def per_seq(cfg: SimConfig, b: int) -> float:
    peak, s1 = cfg.vllm_peak_tok_s, cfg.vllm_single_seq_tok_s
    return peak * s1 / (peak + s1 * (b - 1))


def vllm(**kw) -> tuple[SimConfig, ManualClock, VllmServer]:
    cfg = SimConfig(**kw)
    clock = ManualClock()
    return cfg, clock, VllmServer(cfg, clock)


async def test_batch_speeds_match_formula_and_saturate() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=FAST_PREFILL)
    length = 600
    aggregate, per_sequence = {}, {}
    for b in (1, 8, 32, 128, 256):
        start = clock.now()
        jobs = [server.submit(Job(prompt_tokens=1, tokens=length)) for _ in range(b)]
        clock.advance()
        for job in jobs:
            assert job.done_fut.done()
            assert job.finish - start == pytest.approx(length / per_seq(cfg, b), rel=1e-6)
        makespan = max(j.finish for j in jobs) - start
        aggregate[b] = b * length / makespan
        per_sequence[b] = length / makespan
    sizes = sorted(aggregate)
    assert aggregate[1] == pytest.approx(cfg.vllm_single_seq_tok_s, rel=1e-6)
    assert all(aggregate[x] < aggregate[y] for x, y in zip(sizes, sizes[1:]))  # rises
    assert all(per_sequence[x] > per_sequence[y] for x, y in zip(sizes, sizes[1:]))  # falls
    assert aggregate[256] < cfg.vllm_peak_tok_s
    assert aggregate[256] > 0.9 * cfg.vllm_peak_tok_s  # saturating
    # diminishing returns: doubling from 128 gains far less than doubling from 1
    assert aggregate[256] / aggregate[128] < 1.15 < aggregate[8] / aggregate[1] / 4
    assert server.tokens_generated == length * sum(sizes)


async def test_rates_change_exactly_when_sequences_leave_and_join() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=FAST_PREFILL)
    short, long_ = server.submit(Job(1, 300)), server.submit(Job(1, 900))
    clock.advance()
    t1 = 300 / per_seq(cfg, 2)
    assert short.finish == pytest.approx(t1, rel=1e-6)
    assert long_.finish == pytest.approx(t1 + 600 / per_seq(cfg, 1), rel=1e-6)

    # a sequence joining half-way slows the one already running
    base = clock.now()
    a = server.submit(Job(1, 1200))
    clock.advance(base + 5.0)
    b = server.submit(Job(1, 100))
    clock.advance()
    t_b = 5.0 + 100 / per_seq(cfg, 2)
    left_a = 1200 - 5.0 * cfg.vllm_single_seq_tok_s - 100
    assert b.finish - base == pytest.approx(t_b, rel=1e-6)
    assert a.finish - base == pytest.approx(t_b + left_a / per_seq(cfg, 1), rel=1e-6)


async def test_fifo_queue_beyond_max_num_seqs() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=FAST_PREFILL, vllm_max_num_seqs=2)
    jobs = [server.submit(Job(1, 400)) for _ in range(5)]
    assert server.waiting == 3
    clock.advance()
    wave = 400 / per_seq(cfg, 2)
    expected = [wave, wave, 2 * wave, 2 * wave, 2 * wave + 400 / per_seq(cfg, 1)]
    assert [j.finish for j in jobs] == pytest.approx(expected, rel=1e-6)
    assert [j.admitted for j in jobs][:4] == pytest.approx([0, 0, wave, wave], abs=1e-9)
    assert server.peak_running == 2


async def test_prefill_is_serial_and_sets_ttft() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=1000.0)
    jobs = [server.submit(Job(prompt_tokens=500, tokens=10)) for _ in range(3)]
    clock.advance()
    assert [j.first_token for j in jobs] == pytest.approx([0.5, 1.0, 1.5])
    assert all(j.first_fut.done() for j in jobs)


async def test_running_integral_counts_decoding_sequence_seconds() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=2000.0)
    jobs = [server.submit(Job(prompt_tokens=100 * k, tokens=50 + 70 * k)) for k in range(1, 7)]
    clock.advance()
    decoding = sum(j.finish - j.first_token for j in jobs)
    assert server.running_integral == pytest.approx(decoding, rel=1e-9)
    assert server.running == 0 and server.finished == 6


async def test_abort_frees_the_slot() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=FAST_PREFILL, vllm_max_num_seqs=1)
    first, second = server.submit(Job(1, 10_000)), server.submit(Job(1, 240))
    clock.advance(1.0)
    assert second.admitted is None
    server.abort(first)
    clock.advance()
    assert first.finish is None and server.aborted == 1
    assert second.admitted == pytest.approx(1.0)
    assert second.finish == pytest.approx(1.0 + 240 / cfg.vllm_single_seq_tok_s)


async def test_cancelled_waiter_aborts_its_job() -> None:
    cfg, clock, server = vllm(vllm_prefill_tok_s=FAST_PREFILL)
    task = asyncio.ensure_future(run_job(server, Job(1, 500)))
    await asyncio.sleep(0)
    assert server.running + server.slots_used >= 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.aborted == 1 and server.slots_used == 0


async def test_api_latency_is_load_independent_and_capped() -> None:
    cfg = SimConfig(profile="api", api_max_concurrency=3, api_tok_s=50.0, api_ttft_s=0.5)
    clock = ManualClock()
    server = ApiServer(cfg, clock, LengthSampler(cfg))
    jobs = [server.submit(Job(10, 100 * (k + 1))) for k in range(3)]
    assert server.full()
    with pytest.raises(Rejected):
        server.submit(Job(10, 100))
    clock.advance()
    for k, job in enumerate(jobs):
        ttft = job.first_token - job.arrival
        assert 0.05 < ttft < 5.0
        assert job.finish - job.first_token == pytest.approx(100 * (k + 1) / 50.0)
    assert not server.full()
    again = server.submit(Job(10, 100))
    clock.advance()
    assert again.finish - again.first_token == pytest.approx(2.0)
    assert server.finished == 4 and server.tokens_generated == 700


def test_api_ttft_median_matches_config() -> None:
    sampler = LengthSampler(SimConfig(seed=3))
    ttfts = [sampler.lognormal(0.8, 0.3) for _ in range(4000)]
    assert statistics.median(ttfts) == pytest.approx(0.8, rel=0.05)


def test_lengths_are_seeded_per_stage_and_capped() -> None:
    cfg = SimConfig(seed=7)
    stages = ["rollout", "propose", "evaluate", "select", "nonsense"] * 40
    first = [LengthSampler(cfg).sample(s) for s in stages[:1]]
    a, b = LengthSampler(cfg), LengthSampler(cfg)
    seq_a, seq_b = [a.sample(s) for s in stages], [b.sample(s) for s in stages]
    assert seq_a == seq_b and seq_a[:1] == first
    other = LengthSampler(SimConfig(seed=8))
    assert [other.sample(s) for s in stages] != seq_a
    big = LengthSampler(SimConfig(seed=1))
    rollouts = [big.sample("rollout") for _ in range(4000)]
    assert statistics.median(rollouts) == pytest.approx(900, rel=0.06)
    assert max(rollouts) == 6000  # the cap binds for the long tail
    assert big.dist("select") == cfg.lengths["default"]


def test_sigma_zero_gives_exact_median_and_unnamed_stages_keep_defaults() -> None:
    cfg = SimConfig(lengths={"rollout": LengthDist(median=321, sigma=0, max=1000)})
    sampler = LengthSampler(cfg)
    assert {sampler.sample("rollout") for _ in range(20)} == {321}
    assert sampler.dist("propose") == SimConfig().lengths["propose"]  # a partial table keeps the other stages


async def test_real_clock_maps_loop_time_at_time_scale() -> None:
    """RealClock reads simulated time as loop time x time_scale and never fires a timer early.
    Bounds by the loop's own readings, not by wall-time slack: a loaded machine only delays."""
    clock = RealClock(400.0)
    loop = asyncio.get_running_loop()
    clock.now()  # binds the clock to this loop (t0)
    t0 = clock._t0
    before = loop.time()
    now = clock.now()
    after = loop.time()
    assert (before - t0) * 400.0 <= now <= (after - t0) * 400.0
    due = now + 8.0  # 20 ms of loop time
    fired: list[float] = []
    done = asyncio.Event()
    clock.call_at(due, lambda: (fired.append(loop.time()), done.set()))
    await done.wait()
    assert (fired[0] - t0) * 400.0 >= due - 1e-6 and clock.now() >= due
