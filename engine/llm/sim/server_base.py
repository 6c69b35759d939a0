"""What both serving profiles share: the Job record of one request, its futures, and the
accounting of running and finished sequences (ServerBase).

Separate from serving.py, which holds the two time models (vllm batching with its KV cache, the
api profile) and the length sampler: this part does not depend on either profile.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from engine.llm.sim.clock import Clock
from engine.llm.sim.prefix_cache import PrefixCache


class Rejected(Exception):
    """The api profile refuses a request (HTTP 429): its concurrency cap, or a per-minute limit.
    retry_after_s: simulated seconds until the limit covers it (None: unknown or never)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


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
    # vllm profile: what (re)admission prefills and what is left to decode (both change when
    # the job is preempted), the decode counter when it joined, and how often it was preempted.
    kv_prompt: float = 0.0
    left: float = 0.0
    v_join: float = 0.0
    preemptions: int = 0
    # Prefix caching (prefix_cache.py): the prompt's block hashes, and the tokens the last
    # admission found cached (not prefilled).
    blocks: tuple[bytes, ...] = ()
    cached_tokens: float = 0.0

    @property
    def latency(self) -> float:
        return math.nan if self.finish is None else self.finish - self.arrival


def resolve_future(fut: asyncio.Future | None) -> None:
    if fut is not None and not fut.done():  # a cancelled waiter (client gone) needs nothing
        fut.set_result(None)


class ServerBase:
    """Shared bookkeeping: running-sequence integral and finished-token counts."""

    capacity: int
    prefix_cache: PrefixCache | None = None
    """Set by a profile that models prefix caching; the app then sends each job's blocks."""

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

    def kv_figures(self) -> dict:
        """KV-cache figures (vllm profile; none for a hosted endpoint)."""
        return {}

    def _attach(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        job.first_fut, job.done_fut = loop.create_future(), loop.create_future()

    def settle(self) -> None:
        """Bring the accounting up to the present (only needed while requests are in flight)."""

    def _finish(self, job: Job, t: float) -> None:
        job.finish = t
        self.finished += 1
        self.tokens_generated += job.tokens
        resolve_future(job.first_fut)
        resolve_future(job.done_fut)

    def elapsed(self) -> float:
        """Simulated seconds from the first arrival to now, or to the last event when idle."""
        if self.started_at is None:
            return 0.0
        self.settle()
        return max(0.0, self._t - self.started_at)
