"""Fitting the simulator's vllm profile to measurements of a real server (`evotui sim-calibrate`),
and writing it as a config file with a `[sim]` table (`evotui run --config FILE`).

What is fitted, and from what (calibrate_probe.py measures):
- ``vllm_single_seq_tok_s`` and ``vllm_peak_tok_s``: the serving model's per-sequence decode
  speed is ``per_seq(b) = peak * s1 / (peak + s1 * (b - 1))``, so ``1 / per_seq(b) = 1/s1 +
  (b - 1)/peak`` is a straight line in b: least squares over the levels at or below the server's
  slots (short prompts, so prefill does not mix in), each level's median decode speed.
- ``vllm_prefill_tok_s``: the slope of time to first token against prompt tokens between lone
  requests of two prompt sizes (the intercept, HTTP and scheduling, is not part of the model).
- ``vllm_prefill_shares_compute``: whether decoding stalls while a prompt is prefilled (a CPU
  server computes both on the same cores; a GPU server with separate chunks barely notices).
- ``vllm_prefix_caching``: whether a prompt sent again right after it completed gets its first
  token in under PREFIX_CACHE_THRESHOLD of the time it took the first time (lone requests).
- ``vllm_max_num_seqs``: the server's slots; ``vllm_kv_cache_tokens``: slots x context per slot.
- ``lengths``: a lognormal per stage from observed output lengths: the median, and sigma from the
  16th percentile (``ln median - ln q16``), which a cap at max_tokens does not distort.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone

from engine.llm.sim.calibrate_probe import Level, Sample

NO_CONTENTION_FACTOR = 1000.0
"""When decode speed does not fall with the batch (within noise), peak = s1 x this: no limit."""
SHARED_COMPUTE_THRESHOLD = 0.5
"""Decoding that slows to below this share of its own speed while a prompt is prefilled is
taken to share the server's compute with prefill."""


PREFIX_CACHE_THRESHOLD = 0.5
"""A repeated prompt whose median time to first token is below this share of the same prompt's
first sending's counts as served from a prefix cache (llama.cpp on CPU: about 0.15; a server
without one: about 1, give or take noise)."""
PREFIX_PROBE_MAX_TTFT_S = 2.0
"""The prefix-cache probe uses the long prefill prompt when it took at most this long (a GPU
server, where the short prompt's prefill would hide in the HTTP overhead), else the short one
(a CPU server, where the short one alone takes most of a second)."""


class FitError(ValueError):
    """The measurements cannot give a profile; the message says which ones are missing."""


@dataclass
class Fit:
    single_seq_tok_s: float
    peak_tok_s: float
    prefill_tok_s: float
    max_num_seqs: int
    kv_cache_tokens: int | None
    prefill_shares_compute: bool = False
    lengths: dict[str, dict] = field(default_factory=dict)
    prefix_caching: bool | None = None
    """None: not measured (the profile then keeps SimConfig's default)."""
    notes: list[str] = field(default_factory=list)

    def predicted_per_seq(self, b: int) -> float:
        return self.peak_tok_s * self.single_seq_tok_s / (self.peak_tok_s + self.single_seq_tok_s * (b - 1))

    def sim_table(self) -> dict:
        """The `[sim]` table: keys of engine.config.SimConfig."""
        out: dict = {"profile": "vllm", "vllm_single_seq_tok_s": round(self.single_seq_tok_s, 3),
                     "vllm_peak_tok_s": round(self.peak_tok_s, 3), "vllm_prefill_tok_s": round(self.prefill_tok_s, 3),
                     "vllm_max_num_seqs": self.max_num_seqs,
                     "vllm_prefill_shares_compute": self.prefill_shares_compute}
        if self.prefix_caching is not None:
            out["vllm_prefix_caching"] = self.prefix_caching
        if self.kv_cache_tokens is not None:
            out["vllm_kv_cache_tokens"] = self.kv_cache_tokens
        if self.lengths:
            out["lengths"] = self.lengths
        return out


def level_decode_rate(level: Level) -> float | None:
    rates = [r for r in (s.decode_tok_s for s in level.samples) if r is not None]
    return statistics.median(rates) if rates else None


def fit_decode(levels: list[Level], slots: int) -> tuple[float, float]:
    """(s1, peak) from the levels' median decode speeds (levels above `slots` queue: left out)."""
    points = [(lv.concurrency, r) for lv in levels if lv.concurrency <= slots
              for r in [level_decode_rate(lv)] if r is not None and r > 0]
    if not any(b == 1 for b, _ in points):
        raise FitError("no decode measurement at concurrency 1 (every request was too short to time)")
    if len(points) == 1:
        s1 = points[0][1]
        return s1, s1 * NO_CONTENTION_FACTOR
    xs = [b - 1.0 for b, _ in points]
    ys = [1.0 / r for _, r in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    if intercept <= 0:  # the line passes below zero at b=1: trust the lone-sequence measurement
        intercept = 1.0 / statistics.median(r for b, r in points if b == 1)
        slope = max(0.0, sum(x * (y - intercept) for x, y in zip(xs, ys)) / sum(x * x for x in xs))
    s1 = 1.0 / intercept
    peak = 1.0 / slope if slope > intercept / NO_CONTENTION_FACTOR else s1 * NO_CONTENTION_FACTOR
    return s1, peak


def fit_prefill(samples: list[Sample]) -> float:
    """Prompt tokens per second: slope of TTFT between the smallest and largest prompt sizes."""
    sizes = sorted({s.prompt_tokens for s in samples})
    if len(sizes) < 2:
        raise FitError("prefill needs lone requests of two different prompt sizes")
    lo = [s.ttft_s for s in samples if s.prompt_tokens == sizes[0]]
    hi = [s.ttft_s for s in samples if s.prompt_tokens == sizes[-1]]
    dt = statistics.median(hi) - statistics.median(lo)
    if dt <= 0:
        raise FitError(f"time to first token did not grow from {sizes[0]} to {sizes[-1]} prompt tokens "
                       f"(prompt caching?); prefill speed cannot be measured")
    return (sizes[-1] - sizes[0]) / dt


def prefix_probe_long(prefill: list[Sample]) -> bool:
    """Whether to probe the prefix cache with the larger of the prefill probe's prompts."""
    largest = max((s.prompt_tokens for s in prefill), default=0)
    ttfts = [s.ttft_s for s in prefill if s.prompt_tokens == largest]
    return bool(ttfts) and statistics.median(ttfts) <= PREFIX_PROBE_MAX_TTFT_S


def prefix_cached(repeats: list[Sample], fresh: list[Sample]) -> tuple[bool, str]:
    """(cached, a line saying what was measured) from repeated prompts and their first sendings."""
    if not repeats or not fresh:
        raise FitError("prefix caching needs prompts sent twice and their first sendings")
    again, first = statistics.median(s.ttft_s for s in repeats), statistics.median(s.ttft_s for s in fresh)
    cached = again < PREFIX_CACHE_THRESHOLD * first
    tokens = statistics.median(s.prompt_tokens for s in fresh)
    return cached, (f"prefix cache: a {tokens:.0f}-token prompt took {first:.3f}s to the first token, "
                    f"{again:.3f}s when sent again: {'cached' if cached else 'not cached'}")


def shares_compute(alone_tok_s: float, during_prefill_tok_s: float) -> bool:
    return during_prefill_tok_s < SHARED_COMPUTE_THRESHOLD * alone_tok_s


def fit_lengths(lengths: list[int], cap: int | None = None) -> dict:
    """A lognormal (median, sigma, max) for observed output lengths."""
    xs = sorted(max(1, int(x)) for x in lengths)
    if not xs:
        raise FitError("no output lengths to fit")
    median = statistics.median(xs)
    q16 = xs[max(0, math.ceil(0.16 * len(xs)) - 1)]
    sigma = max(0.05, math.log(median) - math.log(q16)) if len(xs) > 2 else 0.3
    return {"median": round(float(median), 1), "sigma": round(sigma, 3), "max": int(cap or xs[-1])}


def fit_stage_lengths(by_stage: dict[str, list[int]], cap: int | None = None, min_samples: int = 3) -> dict:
    """A lognormal per stage with at least min_samples lengths; the pooled lengths as `default`."""
    out = {stage: fit_lengths(xs, cap) for stage, xs in sorted(by_stage.items()) if len(xs) >= min_samples}
    pooled = [x for xs in by_stage.values() for x in xs]
    if len(pooled) >= min_samples:
        out["default"] = fit_lengths(pooled, cap)
    return out


def fit(levels: list[Level], prefill: list[Sample], *, slots: int, kv_cache_tokens: int | None,
        prefill_shares_compute: bool = False, lengths: dict[str, dict] | None = None,
        prefix_probe: tuple[list[Sample], list[Sample]] | None = None) -> Fit:
    """prefix_probe: (repeats, fresh) of Probe.prefix_cache; None leaves prefix caching unmeasured."""
    s1, peak = fit_decode(levels, slots)
    f = Fit(s1, peak, fit_prefill(prefill), slots, kv_cache_tokens, prefill_shares_compute, dict(lengths or {}))
    if prefix_probe is not None:
        f.prefix_caching, note = prefix_cached(*prefix_probe)
        f.notes.append(note)
    if peak >= s1 * NO_CONTENTION_FACTOR:
        f.notes.append("decode speed did not fall with the batch: no aggregate limit fitted")
    return f


def profile_toml(f: Fit, *, source: str, levels: list[Level]) -> str:
    """The profile as a config file: a comment with the measurements, then `[sim]`."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Simulator profile measured by `evotui sim-calibrate` on {when} from {source}.",
             "# Use it with `evotui run TASK --config THIS_FILE` (the [sim] table replaces the defaults).",
             "# concurrency | median decode tok/s per sequence (fitted) | aggregate tok/s | median TTFT s"]
    for lv in levels:
        r = level_decode_rate(lv)
        ttft = statistics.median(s.ttft_s for s in lv.samples) if lv.samples else math.nan
        lines.append(f"#  {lv.concurrency:4d} | {r or 0:8.2f} ({f.predicted_per_seq(min(lv.concurrency, f.max_num_seqs)):8.2f}) | "
                     f"{lv.aggregate_tok_s:8.2f} | {ttft:.3f}")
    lines += [f"# {n}" for n in f.notes]
    lines.append("")
    table = f.sim_table()
    lengths = table.pop("lengths", {})
    lines.append("[sim]")
    lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    for stage, d in sorted(lengths.items()):
        lines += ["", f"[sim.lengths.{stage}]"] + [f"{k} = {_toml_value(v)}" for k, v in d.items()]
    return "\n".join(lines) + "\n"


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)
