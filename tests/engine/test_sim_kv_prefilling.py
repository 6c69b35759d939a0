"""The vllm profile's KV cache when one sequence decodes while others are being prefilled: the
prefilling ones hold their prompts' blocks, so the cache can fill with a single decoding
sequence, and the latest admitted (a prefilling one) is preempted. Hypothesis found the case
(tests/engine/test_sim_kv_cache.py: the cache overflowed by 0.16 tokens)."""

from __future__ import annotations

import pytest

from engine.config import SimConfig
from engine.llm.sim.clock import ManualClock
from engine.llm.sim.serving import Job, VllmServer


async def test_a_lone_decoding_sequence_beside_prefilling_ones_cannot_overflow_the_cache():
    clock = ManualClock()
    srv = VllmServer(SimConfig(vllm_prefill_tok_s=4000.0, vllm_kv_cache_tokens=1288, vllm_max_num_seqs=4), clock)
    jobs = []
    for prompt, tokens, gap in [(236, 228, 0.0), (205, 238, 0.0), (384, 145, 0.0), (1, 101, 0.3125), (216, 1, 1.0)]:
        clock.advance(gap)
        jobs.append(srv.submit(Job(prompt_tokens=prompt, tokens=tokens)))
    clock.advance()
    assert srv.peak_kv_used <= 1288 + 1e-6  # it was 1288.16 while the preempted jobs were prefilled again
    assert all(j.finish is not None for j in jobs)
    assert srv.tokens_generated == 228 + 238 + 145 + 101 + 1
    assert srv.preemptions >= 1 and srv.kv_used == pytest.approx(0.0, abs=1e-6)


async def test_a_prefilling_job_preempted_before_its_prefill_counts_no_prefill():
    # Two prompts fill the cache (no watermark room for more); the first decodes and fills it
    # while the second is still queued for prefill behind it, so the second is preempted.
    clock = ManualClock()
    srv = VllmServer(SimConfig(vllm_prefill_tok_s=100.0, vllm_kv_cache_tokens=1000, vllm_max_num_seqs=4,
                               vllm_single_seq_tok_s=1000.0, vllm_peak_tok_s=1e6), clock)
    first = srv.submit(Job(prompt_tokens=100, tokens=900))
    second = srv.submit(Job(prompt_tokens=800, tokens=10))
    clock.advance(1.5)  # first prefilled at 1 s; second prefills from 1 s to 9 s; first decodes
    assert second.preemptions == 1 and srv.kv_used <= 1000 + 1e-6
    assert srv.prefilled_tokens == 100  # the second's prefill never happened
    clock.advance()
    assert first.finish is not None and second.finish is not None and second.finish > first.finish
