"""Serving-time model of the simulated backend, in simulated seconds.

Two profiles:
- ``VllmServer``: one GPU with continuous batching. A request waits FIFO for one of
  ``vllm_max_num_seqs`` slots, then its prompt is prefilled (prefill is compute-bound, so
  prompts are processed one after another at ``vllm_prefill_tok_s``), then it decodes under
  processor sharing: with b sequences decoding, each advances at
  ``per_seq(b) = peak * s1 / (peak + s1 * (b - 1))`` tokens per simulated second.
- ``ApiServer``: a hosted endpoint whose latency does not depend on load, with a hard
  concurrency cap above which requests are rejected (HTTP 429).

Both are discrete-event simulators driven by clock timers: rates change exactly when a
sequence joins or leaves, and nothing polls. The clock maps simulated time to real time
(``RealClock``) or is advanced by hand (``ManualClock``, exact and instant, for tests).
"""

from __future__ import annotations

import asyncio
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

from engine.config import LengthDist, SimConfig

FALLBACK_LENGTH = LengthDist(median=600, sigma=0.7, max=6000)
"""Used when cfg.lengths has neither the request's stage nor a "default" entry."""
API_TTFT_SIGMA = 0.3
_EPS_TOKENS = 1e-6


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Simulated time source; ``call_at`` runs a callback at a simulated instant."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class RealClock:
    """Simulated seconds = event-loop seconds since first use * time_scale."""

    def __init__(self, time_scale: float) -> None:
        self.time_scale = time_scale
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0

    def _bind(self) -> asyncio.AbstractEventLoop | None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._loop  # read outside the loop (metrics after a run): its clock still works
        if self._loop is None:
            self._loop, self._t0 = loop, loop.time()
        elif loop is not self._loop:
            # Timers of the old loop would never fire; one backend serves one loop.
            raise RuntimeError("simulated backend used from a second event loop; create one app per loop")
        return loop

    def now(self) -> float:
        loop = self._bind()
        return 0.0 if loop is None else (loop.time() - self._t0) * self.time_scale

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = self._bind()
        if loop is None:
            raise RuntimeError("the simulated backend needs a running event loop")
        return loop.call_at(self._t0 + when / self.time_scale, callback)


@dataclass(order=True)
class _ManualTimer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that only moves when told to: ``advance()`` fires due timers in time order."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._heap: list[_ManualTimer] = []
        self._seq = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        self._seq += 1
        heapq.heappush(self._heap, timer := _ManualTimer(max(when, self._now), self._seq, callback))
        return timer

    def advance(self, until: float = math.inf) -> None:
        """Fire every timer due at or before ``until`` (all of them by default)."""
        while self._heap and self._heap[0].when <= until:
            timer = heapq.heappop(self._heap)
            if not timer.cancelled:
                self._now = timer.when
                timer.callback()
        if until != math.inf:
            self._now = max(self._now, until)


class LengthSampler:
    """Seeded lognormal completion lengths per stage; one generator, so the sequence of
    lengths depends only on cfg.seed and the order of requests."""

    def __init__(self, cfg: SimConfig) -> None:
        self._rng = random.Random(cfg.seed)
        self._lengths = cfg.lengths

    def dist(self, stage: str) -> LengthDist:
        return self._lengths.get(stage) or self._lengths.get("default") or FALLBACK_LENGTH

    def sample(self, stage: str) -> int:
        d = self.dist(stage)
        return max(1, min(d.max, int(round(self.lognormal(d.median, d.sigma)))))

    def lognormal(self, median: float, sigma: float) -> float:
        return median * math.exp(sigma * self._rng.gauss(0.0, 1.0))


class Rejected(Exception):
    """The api profile is at its concurrency cap (answered with HTTP 429)."""


@dataclass(eq=False)
class Job:
    """One generation request; times are simulated seconds, filled in as it progresses."""

    prompt_tokens: int
    tokens: int
    arrival: float = 0.0
    admitted: float | None = None
    first_token: float | None = None
    finish: float | None = None
    first_fut: asyncio.Future | None = None
    done_fut: asyncio.Future | None = None

    @property
    def latency(self) -> float:
        return math.nan if self.finish is None else self.finish - self.arrival


def _resolve(fut: asyncio.Future | None) -> None:
    if fut is not None and not fut.done():  # a cancelled waiter (client gone) needs nothing
        fut.set_result(None)


class _ServerBase:
    """Shared bookkeeping: running-sequence integral and finished-token counts."""

    capacity: int

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.running_integral = 0.0
        """Sum over simulated time of running (decoding) sequences: seq * seconds."""
        self.tokens_generated = 0
        self.finished = 0
        self.aborted = 0
        self.peak_running = 0
        self.started_at: float | None = None
        self._t = 0.0  # simulated time up to which the accounting is exact

    def full(self) -> bool:
        """True when a new request would be rejected right now (api profile only)."""
        return False

    def _attach(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        job.first_fut, job.done_fut = loop.create_future(), loop.create_future()

    def settle(self) -> None:
        """Bring the accounting up to the present (only needed while requests are in flight)."""

    def _finish(self, job: Job, t: float) -> None:
        job.finish = t
        self.finished += 1
        self.tokens_generated += job.tokens
        _resolve(job.first_fut)
        _resolve(job.done_fut)

    def elapsed(self) -> float:
        """Simulated seconds from the first arrival to now, or to the last event when idle."""
        if self.started_at is None:
            return 0.0
        self.settle()
        return max(0.0, self._t - self.started_at)


class VllmServer(_ServerBase):
    """Continuous batching with processor-sharing decode (see module docstring).

    All decoding sequences advance at the same rate, so progress is kept as one counter
    ``_v`` (tokens decoded per sequence so far); a job finishes when ``_v`` reaches the value
    it had on joining plus its length. Events then cost O(log b) instead of O(b).
    """

    def __init__(self, cfg: SimConfig, clock: Clock) -> None:
        super().__init__(clock)
        self.s1 = cfg.vllm_single_seq_tok_s
        self.peak = cfg.vllm_peak_tok_s
        self.capacity = cfg.vllm_max_num_seqs
        self.prefill_tok_s = cfg.vllm_prefill_tok_s
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

    def submit(self, job: Job) -> Job:
        self._attach(job)
        now = self._sync_to_now()
        if self.started_at is None:
            self.started_at = now
        job.arrival = now
        self._waiting.append(job)
        self._admit(now)
        self._reschedule()
        return job

    def abort(self, job: Job) -> None:
        """Drop an unfinished job (client went away), freeing its slot as vLLM does."""
        if job.finish is not None:
            return
        now = self._sync_to_now()
        if job in self._waiting:
            self._waiting.remove(job)
        else:
            self._prefilling = [e for e in self._prefilling if e[2] is not job]
            self._decoding = [e for e in self._decoding if e[2] is not job]
            heapq.heapify(self._prefilling)
            heapq.heapify(self._decoding)
        self.aborted += 1
        self._admit(now)
        self._reschedule()

    def _sync_to_now(self) -> float:
        now = max(self.clock.now(), self._t)
        self._sync(now)
        return now

    def settle(self) -> None:
        if self.slots_used or self._waiting:
            self._sync_to_now()
            self._reschedule()

    def _admit(self, t: float) -> None:
        while self._waiting and self.slots_used < self.capacity:
            job = self._waiting.popleft()
            job.admitted = t
            start = max(t, self._prefill_free)
            self._prefill_free = start + job.prompt_tokens / self.prefill_tok_s
            self._seq += 1
            heapq.heappush(self._prefilling, (self._prefill_free, self._seq, job))

    def _prefill_event(self) -> float:
        return self._prefilling[0][0] if self._prefilling else math.inf

    def _decode_event(self) -> float:
        if not self._decoding:
            return math.inf
        left = max(self._decoding[0][0] - self._v, 0.0)
        return self._t + left / self.per_seq(len(self._decoding))

    def _advance(self, t: float) -> None:
        dt = t - self._t
        if dt > 0 and self._decoding:
            b = len(self._decoding)
            self._v += self.per_seq(b) * dt
            self.running_integral += b * dt
        self._t = max(self._t, t)

    def _sync(self, until: float) -> None:
        """Process every event up to ``until`` in time order, then advance to ``until``."""
        while True:
            t_dec = self._decode_event()
            t_ev = min(self._prefill_event(), t_dec)
            if t_ev > until:
                break
            self._advance(t_ev)
            if t_dec <= t_ev:
                # The job that set the event always finishes (progress despite float rounding),
                # together with any other that reaches its length at the same instant.
                self._finish(heapq.heappop(self._decoding)[2], t_ev)
                while self._decoding and self._decoding[0][0] - self._v <= _EPS_TOKENS:
                    self._finish(heapq.heappop(self._decoding)[2], t_ev)
            while self._prefilling and self._prefilling[0][0] <= t_ev:
                _, seq, job = heapq.heappop(self._prefilling)
                job.first_token = t_ev
                _resolve(job.first_fut)
                heapq.heappush(self._decoding, (self._v + job.tokens, seq, job))
                self.peak_running = max(self.peak_running, len(self._decoding))
            self._admit(t_ev)
        self._advance(until)

    def _reschedule(self) -> None:
        nxt = min(self._prefill_event(), self._decode_event())
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


class ApiServer(_ServerBase):
    """Load-independent latency: lognormal TTFT + tokens / api_tok_s; 429 above the cap."""

    def __init__(self, cfg: SimConfig, clock: Clock, sampler: LengthSampler) -> None:
        super().__init__(clock)
        self.capacity = cfg.api_max_concurrency
        self.ttft_s = cfg.api_ttft_s
        self.tok_s = cfg.api_tok_s
        self._sampler = sampler
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
            self.clock.call_at(job.first_token, lambda: _resolve(job.first_fut)),
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
