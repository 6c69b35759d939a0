"""Serving-time model of the simulated backend, in simulated seconds.

Two profiles:
- ``VllmServer``: one GPU with continuous batching. A request waits FIFO for one of
  ``vllm_max_num_seqs`` slots, then its prompt is prefilled (prefill is compute-bound, so
  prompts are processed one after another at ``vllm_prefill_tok_s``), then it decodes under
  processor sharing: with b sequences decoding, each advances at
  ``per_seq(b) = peak * s1 / (peak + s1 * (b - 1))`` tokens per simulated second.
  The KV cache holds ``vllm_kv_cache_tokens``: a request is admitted only if its prompt fits
  (above a 1% watermark); when decoding fills the cache, the latest admitted sequence is
  preempted (recompute: it waits at the head of the queue, then prefills prompt and output so
  far again), as vLLM's scheduler does. With ``vllm_prefill_shares_compute`` (a CPU server such
  as llama.cpp, which runs prompt tokens in the same batches as decode steps on the same cores)
  decoding pauses while a prompt is prefilled. With ``vllm_prefix_caching`` a prompt's leading
  blocks that an earlier prompt already prefilled are not prefilled again (prefix_cache.py).
- ``ApiServer``: a hosted endpoint whose latency does not depend on load, with a hard
  concurrency cap and optional tokens- and requests-per-minute limits (rate_limits.py) above
  which requests are rejected (HTTP 429 with the wait in Retry-After).

Both are discrete-event simulators driven by clock timers (clock.py): rates change exactly
when a sequence joins or leaves, and nothing polls. The Job record and the accounting both
share are in server_base.py.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

from engine.config import LengthDist, SimConfig
from engine.llm.sim.clock import Clock, TimerHandle
from engine.llm.sim.prefix_cache import BLOCK_TOKENS, PrefixCache
from engine.llm.sim.rate_limits import OverLimit, RateLimits
from engine.llm.sim.server_base import Job, Rejected, ServerBase, resolve_future

FALLBACK_LENGTH = LengthDist(median=600, sigma=0.7, max=6000)
"""Used when cfg.lengths has neither the request's stage nor a "default" entry."""
API_TTFT_SIGMA = 0.3
_EPS_TOKENS = 1e-6
KV_WATERMARK = 0.01
"""Share of the KV cache kept free at admission (vLLM's watermark, 1% of blocks)."""


class LengthSampler:
    """Seeded lognormal completion lengths per stage; one generator, so the sequence of
    lengths depends only on cfg.seed and the order of requests."""

    def __init__(self, cfg: SimConfig) -> None:
        self._rng = random.Random(cfg.seed)
        self._lengths = cfg.lengths

    def dist(self, stage: str) -> LengthDist:
        return self._lengths.get(stage) or self._lengths.get("default") or FALLBACK_LENGTH

    def sample(self, stage: str, rng: random.Random | None = None) -> int:
        """rng: the request's own generator (a keyed request), else the shared one."""
        d = self.dist(stage)
        return max(1, min(d.max, int(round(self.lognormal(d.median, d.sigma, rng)))))

    def lognormal(self, median: float, sigma: float, rng: random.Random | None = None) -> float:
        return median * math.exp(sigma * (rng or self._rng).gauss(0.0, 1.0))


class VllmServer(ServerBase):
    """Continuous batching with processor-sharing decode and a KV cache (see module docstring).

    All decoding sequences advance at the same rate, so progress is kept as one counter
    ``_v`` (tokens decoded per sequence so far); a job finishes when ``_v`` reaches the value
    it had on joining plus what it has left to decode. Events then cost O(log b) instead of
    O(b). KV-cache use is kept the same way: the admitted jobs' prompts plus, per decoding job,
    ``_v`` minus its join value, so it grows at the batch's decode rate and the instant it
    fills is one more event.
    """

    def __init__(self, cfg: SimConfig, clock: Clock) -> None:
        super().__init__(clock)
        self.s1 = cfg.vllm_single_seq_tok_s
        self.peak = cfg.vllm_peak_tok_s
        self.capacity = cfg.vllm_max_num_seqs
        self.prefill_tok_s = cfg.vllm_prefill_tok_s
        self.prefill_shares_compute = cfg.vllm_prefill_shares_compute
        self.kv_capacity: float = cfg.vllm_kv_cache_tokens or math.inf
        self._kv_admit_limit = self.kv_capacity * (1.0 - KV_WATERMARK)
        self.preemptions = 0
        self.peak_kv_used = 0.0
        if cfg.vllm_prefix_caching:
            # The cached blocks live in the KV cache's block pool: at most all of it (see README).
            blocks = None if cfg.vllm_kv_cache_tokens is None else max(1, cfg.vllm_kv_cache_tokens // BLOCK_TOKENS)
            self.prefix_cache = PrefixCache(blocks)
        self.prefilled_tokens = 0.0  # prompt tokens computed, and those found in the prefix cache
        self.prefix_cached_tokens = 0.0
        self._kv_static = 0.0  # prompts (and recomputed output) of admitted jobs
        self._kv_joins = 0.0  # sum of decoding jobs' join values of _v
        self._waiting: deque[Job] = deque()
        self._prefilling: list[tuple[float, int, Job]] = []  # (prefill end time, seq, job)
        self._decoding: list[tuple[float, int, Job]] = []  # (finish value of _v, seq, job)
        self._v = 0.0
        self._prefill_free = 0.0
        self._seq = 0
        self._timer: TimerHandle | None = None
        self._timer_when = math.inf

    def per_seq(self, b: int) -> float:
        return self.peak * self.s1 / (self.peak + self.s1 * (b - 1))

    @property
    def running(self) -> int:
        return len(self._decoding)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def slots_used(self) -> int:
        return len(self._prefilling) + len(self._decoding)

    def kv_figures(self) -> dict:
        cap = None if self.kv_capacity == math.inf else int(self.kv_capacity)
        return {"kv_capacity": cap, "kv_used": round(self.kv_used), "peak_kv_used": round(self.peak_kv_used),
                "preemptions": self.preemptions, "prefix_caching": self.prefix_cache is not None,
                "prefilled_tokens": round(self.prefilled_tokens),
                "prefix_cached_tokens": round(self.prefix_cached_tokens),
                "prefix_evicted_blocks": self.prefix_cache.evicted if self.prefix_cache is not None else 0}

    @property
    def kv_used(self) -> float:
        """KV-cache tokens held now: admitted prompts plus every decoding job's output so far."""
        return self._kv_static + len(self._decoding) * self._v - self._kv_joins

    def submit(self, job: Job) -> Job:
        self._attach(job)
        now = self._sync_to_now()
        if self.started_at is None:
            self.started_at = now
        job.arrival = now
        job.kv_prompt, job.left = job.prompt_tokens, job.tokens
        self._waiting.append(job)
        self._admit(now)
        self._reschedule()
        return job

    def abort(self, job: Job) -> None:
        """Drop an unfinished job (client went away), freeing its slot and cache as vLLM does."""
        if job.finish is not None:
            return
        now = self._sync_to_now()
        if job in self._waiting:
            self._waiting.remove(job)
        else:
            if any(e[2] is job for e in self._decoding):
                self._leave_decoding(job)
            elif any(e[2] is job for e in self._prefilling):
                self._prefilling = [e for e in self._prefilling if e[2] is not job]
                heapq.heapify(self._prefilling)
                self._kv_static -= job.kv_prompt
        self.aborted += 1
        self._admit(now)
        self._reschedule()

    def _leave_decoding(self, job: Job) -> None:
        self._decoding = [e for e in self._decoding if e[2] is not job]
        heapq.heapify(self._decoding)
        self._kv_static -= job.kv_prompt
        self._kv_joins -= job.v_join

    def _sync_to_now(self) -> float:
        now = max(self.clock.now(), self._t)
        self._sync(now)
        return now

    def settle(self) -> None:
        if self.slots_used or self._waiting:
            self._sync_to_now()
            self._reschedule()

    def _admit(self, t: float) -> None:
        # FIFO, as vLLM's scheduler: the head waits for a slot and for room for its prompt in
        # the cache (above a watermark, so a preempted job is not readmitted into a full cache).
        while self._waiting and self.slots_used < self.capacity:
            job = self._waiting[0]
            if self.slots_used and self.kv_used + job.kv_prompt > self._kv_admit_limit:
                break
            self._waiting.popleft()
            if job.admitted is None:
                job.admitted = t
            start = max(t, self._prefill_free)
            cache = self.prefix_cache
            job.cached_tokens = cache.cached_tokens(job.blocks, job.kv_prompt) if cache is not None else 0
            self.prefix_cached_tokens += job.cached_tokens
            self.prefilled_tokens += job.kv_prompt - job.cached_tokens
            self._prefill_free = start + (job.kv_prompt - job.cached_tokens) / self.prefill_tok_s
            self._kv_static += job.kv_prompt
            self._seq += 1
            heapq.heappush(self._prefilling, (self._prefill_free, self._seq, job))

    def _prefill_event(self) -> float:
        return self._prefilling[0][0] if self._prefilling else math.inf

    def _decode_paused(self) -> bool:
        """Prefill holds the compute decoding needs (prefills run back to back, so a job in
        _prefilling means the prefill queue is busy now)."""
        return self.prefill_shares_compute and bool(self._prefilling)

    def _decode_event(self) -> float:
        if not self._decoding or self._decode_paused():
            return math.inf
        left = max(self._decoding[0][0] - self._v, 0.0)
        return self._t + left / self.per_seq(len(self._decoding))

    def _kv_full_event(self) -> float:
        """When the cache fills at the current decode rate (never with one sequence left: vLLM
        cannot preempt its last running sequence, it would make no progress at all; a job being
        prefilled counts as running, it holds its prompt's blocks)."""
        b = len(self._decoding)
        if b < 1 or self.slots_used < 2 or self.kv_capacity == math.inf or self._decode_paused():
            return math.inf
        return self._t + max(self.kv_capacity - self.kv_used, 0.0) / (b * self.per_seq(b))

    def _advance(self, t: float) -> None:
        dt = t - self._t
        if dt > 0 and self._decoding:
            b = len(self._decoding)
            if not self._decode_paused():
                self._v += self.per_seq(b) * dt
            self.running_integral += b * dt
        self._t = max(self._t, t)

    def _preempt(self) -> None:
        """Cache full: the latest admitted decoding job gives its blocks back and waits at the
        head of the queue; on readmission it prefills its prompt and the output so far again
        (vLLM's recompute preemption), then decodes what it has left. A job admitted later that
        is still being prefilled goes first; its prefill has not happened (its booked turn on
        the prefill queue stays taken, as for an abort)."""
        _, _, job = max(self._decoding + self._prefilling, key=lambda e: e[1])
        if any(e[2] is job for e in self._decoding):
            done = self._v - job.v_join
            self._leave_decoding(job)
            job.kv_prompt += done
            job.left -= done
        else:  # its prompt was not computed: neither prefilled nor cached
            self._prefilling = [e for e in self._prefilling if e[2] is not job]
            heapq.heapify(self._prefilling)
            self._kv_static -= job.kv_prompt
            self.prefilled_tokens -= job.kv_prompt - job.cached_tokens
            self.prefix_cached_tokens -= job.cached_tokens
        job.preemptions += 1
        self.preemptions += 1
        self._waiting.appendleft(job)

    def _sync(self, until: float) -> None:
        """Process every event up to ``until`` in time order, then advance to ``until``."""
        while True:
            t_dec = self._decode_event()
            t_kv = self._kv_full_event()
            t_ev = min(self._prefill_event(), t_dec, t_kv)
            if t_ev > until:
                break
            self._advance(t_ev)
            self.peak_kv_used = max(self.peak_kv_used, self.kv_used)
            if t_dec <= t_ev:
                # The job that set the event always finishes (progress despite float rounding),
                # together with any other that reaches its length at the same instant.
                self._finish_decoding(heapq.heappop(self._decoding)[2], t_ev)
                while self._decoding and self._decoding[0][0] - self._v <= _EPS_TOKENS:
                    self._finish_decoding(heapq.heappop(self._decoding)[2], t_ev)
            elif t_kv <= t_ev:
                self._preempt()
            while self._prefilling and self._prefilling[0][0] <= t_ev:
                _, seq, job = heapq.heappop(self._prefilling)
                if self.prefix_cache is not None:  # its prompt's blocks are computed now
                    self.prefix_cache.insert(job.blocks)
                if job.first_token is None:
                    job.first_token = t_ev
                    resolve_future(job.first_fut)
                job.v_join = self._v
                self._kv_joins += self._v
                heapq.heappush(self._decoding, (self._v + job.left, seq, job))
                self.peak_running = max(self.peak_running, len(self._decoding))
            self._admit(t_ev)
        self._advance(until)
        self.peak_kv_used = max(self.peak_kv_used, self.kv_used)

    def _finish_decoding(self, job: Job, t: float) -> None:
        self._kv_static -= job.kv_prompt
        self._kv_joins -= job.v_join
        self._finish(job, t)

    def _reschedule(self) -> None:
        nxt = min(self._prefill_event(), self._decode_event(), self._kv_full_event())
        if nxt == self._timer_when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_when = nxt
        self._timer = self.clock.call_at(nxt, self._on_timer) if nxt < math.inf else None

    def _on_timer(self) -> None:
        due = self._timer_when
        self._timer, self._timer_when = None, math.inf
        # A timer may fire a hair early; the event is still processed at its exact time.
        self._sync(max(self.clock.now(), due, self._t))
        self._reschedule()


class ApiServer(ServerBase):
    """Load-independent latency: lognormal TTFT + tokens / api_tok_s; 429 above the cap or
    the per-minute limits."""

    def __init__(self, cfg: SimConfig, clock: Clock, sampler: LengthSampler) -> None:
        super().__init__(clock)
        self.capacity = cfg.api_max_concurrency
        self.ttft_s = cfg.api_ttft_s
        self.tok_s = cfg.api_tok_s
        self._sampler = sampler
        self.limits = RateLimits(cfg.api_tokens_per_minute, cfg.api_requests_per_minute)
        self._active: set[Job] = set()
        self._timers: dict[Job, list[TimerHandle]] = {}

    waiting = 0  # no queue: overload is rejected

    @property
    def running(self) -> int:
        return len(self._active)

    def full(self) -> bool:
        return len(self._active) >= self.capacity

    def _account(self, t: float) -> None:
        if t > self._t:
            self.running_integral += len(self._active) * (t - self._t)
            self._t = t

    def settle(self) -> None:
        if self._active:
            self._account(self.clock.now())

    def submit(self, job: Job) -> Job:
        now = max(self.clock.now(), self._t)
        if len(self._active) >= self.capacity:
            raise Rejected(f"more than {self.capacity} concurrent requests")
        try:
            self.limits.admit(job.prompt_tokens + job.tokens, now)
        except OverLimit as exc:
            raise Rejected(str(exc), exc.retry_after_s) from None
        self._attach(job)
        if self.started_at is None:
            self.started_at = now
        self._account(now)
        job.arrival = job.admitted = now
        job.first_token = now + self._sampler.lognormal(self.ttft_s, API_TTFT_SIGMA)
        job.finish = None
        finish = job.first_token + job.tokens / self.tok_s
        self._active.add(job)
        self.peak_running = max(self.peak_running, len(self._active))
        self._timers[job] = [
            self.clock.call_at(job.first_token, lambda: resolve_future(job.first_fut)),
            self.clock.call_at(finish, lambda: self._done(job, finish)),
        ]
        return job

    def _done(self, job: Job, t: float) -> None:
        self._account(t)
        self._active.discard(job)
        self._timers.pop(job, None)
        self._finish(job, t)

    def abort(self, job: Job) -> None:
        if job not in self._active:
            return
        self._account(max(self.clock.now(), self._t))
        self._active.discard(job)
        for handle in self._timers.pop(job, []):
            handle.cancel()
        self.aborted += 1


Server = VllmServer | ApiServer


def make_server(cfg: SimConfig, clock: Clock, sampler: LengthSampler) -> Server:
    if cfg.profile == "api":
        return ApiServer(cfg, clock, sampler)
    return VllmServer(cfg, clock)


async def run_job(server: Server, job: Job) -> Job:
    """Submit and wait for completion; cancellation aborts the job."""
    server.submit(job)
    assert job.done_fut is not None
    try:
        await job.done_fut
    finally:
        if job.finish is None:
            server.abort(job)
    return job
