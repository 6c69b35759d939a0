"""`evotui sim-calibrate`'s prefix-cache detection: what the probe sends (httpx.MockTransport)
and how the fit decides from synthetic samples, down to the profile file."""

from __future__ import annotations

import json
import tomllib

import httpx
import pytest

from engine.config import RunConfig
from engine.llm.sim import calibrate_fit as fitting
from engine.llm.sim.calibrate_probe import Level, Probe, Sample


def _sample(ttft: float, prompt_tokens: int = 100) -> Sample:
    return Sample(1, prompt_tokens, 2, ttft, ttft + 0.01)


def _sse() -> httpx.Response:
    chunks = [{"choices": [{"index": 0, "delta": {"content": "t "}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
               "usage": {"prompt_tokens": 90, "completion_tokens": 2}}]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


async def test_the_probe_sends_each_new_prompt_then_the_same_text_again():
    prompts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        prompts.append(json.loads(request.content)["messages"][0]["content"])
        return _sse()

    probe = Probe("http://server.test/v1", "m")
    async with httpx.AsyncClient(base_url=probe.url, transport=httpx.MockTransport(handler)) as http:
        repeats, fresh = await probe.prefix_cache(http, "long prompt " * 30, rounds=3)
    assert len(repeats) == len(fresh) == 3 and len(prompts) == 6
    assert prompts[0] == prompts[1] and prompts[2] == prompts[3] and prompts[4] == prompts[5]
    assert len({prompts[0], prompts[2], prompts[4]}) == 3  # each round's first sending is new
    assert prompts[0].endswith("long prompt " * 30)


@pytest.mark.parametrize("again,first,cached", [
    (0.12, 0.78, True),   # llama.cpp, SmolLM2-135M on CPU: a 116-token prompt cold and cached
    (0.74, 0.78, False),  # no cache: the same time give or take noise
    (0.39, 0.78, False),  # exactly half is not "under" half
    (0.38, 0.78, True),
])
def test_cached_when_the_repeat_takes_under_half_the_first_time(again, first, cached):
    repeats = [_sample(again), _sample(again * 1.1), _sample(again * 0.9)]
    fresh = [_sample(first * 0.95), _sample(first), _sample(first * 1.05)]
    got, note = fitting.prefix_cached(repeats, fresh)
    assert got is cached
    assert note == (f"prefix cache: a 100-token prompt took {first:.3f}s to the first token, {again:.3f}s when "
                    f"sent again: {'cached' if cached else 'not cached'}")


def test_one_slow_outlier_does_not_decide():
    repeats = [_sample(0.1), _sample(0.1), _sample(5.0)]  # medians: 0.1 against 0.8
    assert fitting.prefix_cached(repeats, [_sample(0.8)] * 3)[0] is True


def test_detection_needs_both_kinds_of_samples():
    with pytest.raises(fitting.FitError, match="sent twice"):
        fitting.prefix_cached([], [_sample(0.8)])


def test_the_long_prompt_probes_a_fast_server_and_the_short_one_a_slow_one():
    gpu = [_sample(0.02, 80), _sample(0.08, 800)]
    cpu = [_sample(0.8, 80), _sample(7.6, 800)]
    assert fitting.prefix_probe_long(gpu) is True
    assert fitting.prefix_probe_long(cpu) is False


@pytest.mark.parametrize("again,expected", [(0.1, True), (0.8, False)])
def test_the_profile_file_carries_the_verdict(tmp_path, again, expected):
    levels = [Level(1, 1.0, [Sample(1, 40, 65, 0.05, 0.05 + 64 / 30.0)] * 2)]
    prefill = [Sample(1, n, 1, n / 150.0, n / 150.0) for n in (80, 800)]
    fit = fitting.fit(levels, prefill, slots=4, kv_cache_tokens=8192,
                      prefix_probe=([_sample(again)], [_sample(0.8)]))
    path = tmp_path / "profile.toml"
    path.write_text(fitting.profile_toml(fit, source="a test", levels=levels))
    assert RunConfig.model_validate(tomllib.loads(path.read_text())).sim.vllm_prefix_caching is expected
    assert "# prefix cache: a 100-token prompt" in path.read_text()  # what was measured, as a comment


def test_unmeasured_prefix_caching_keeps_the_default():
    levels = [Level(1, 1.0, [Sample(1, 40, 65, 0.05, 0.05 + 64 / 30.0)] * 2)]
    prefill = [Sample(1, n, 1, n / 150.0, n / 150.0) for n in (80, 800)]
    fit = fitting.fit(levels, prefill, slots=4, kv_cache_tokens=8192)
    assert "vllm_prefix_caching" not in fit.sim_table()
