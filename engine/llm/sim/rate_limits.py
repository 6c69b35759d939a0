"""Tokens- and requests-per-minute limits of the simulated hosted endpoint (api profile), as
hosted APIs enforce them: a bucket per limit that holds one minute's allowance and refills
continuously (OpenAI and Anthropic both describe their limits so); a request the buckets cannot
cover is refused with HTTP 429 and the wait until they can in Retry-After.

A request is charged its prompt plus completion tokens when it is admitted. A hosted API has to
estimate the output from max_tokens at that moment and settles later; the simulator already
knows the output's length, so it charges it exactly and there is nothing to settle.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Bucket:
    """`per_minute` units, refilled at per_minute / 60 per simulated second, full at the start."""

    per_minute: float
    level: float = -1.0
    at: float = 0.0

    def __post_init__(self) -> None:
        if self.level < 0:
            self.level = self.per_minute

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.per_minute, self.level + (now - self.at) * self.rate)
            self.at = now

    def wait_for(self, cost: float, now: float) -> float | None:
        """Seconds until `cost` is covered (0 if now); None if it never can be (over a minute's)."""
        if cost > self.per_minute:
            return None
        self.refill(now)
        return max(0.0, (cost - self.level) / self.rate)


class OverLimit(Exception):
    """A request the limits do not cover now; retry_after_s is in simulated seconds (None: never)."""

    def __init__(self, message: str, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RateLimits:
    def __init__(self, tokens_per_minute: int | None, requests_per_minute: int | None) -> None:
        self.tokens = Bucket(float(tokens_per_minute)) if tokens_per_minute else None
        self.requests = Bucket(float(requests_per_minute)) if requests_per_minute else None
        self.refused = {"tokens": 0, "requests": 0}

    def admit(self, tokens: int, now: float) -> None:
        """Charge one request of `tokens` tokens, or raise OverLimit without charging anything."""
        checks = [(name, bucket, cost) for name, bucket, cost in
                  (("requests", self.requests, 1.0), ("tokens", self.tokens, float(tokens))) if bucket is not None]
        waits = [(name, bucket, bucket.wait_for(cost, now)) for name, bucket, cost in checks]
        for name, bucket, wait in waits:
            if wait is None:
                self.refused[name] += 1
                raise OverLimit(f"request too large: {tokens} tokens, over the limit of "
                                f"{bucket.per_minute:g} tokens per minute", None)
        worst = max(((w, name, b) for name, b, w in waits if w and w > 0), default=None, key=lambda x: x[0])
        if worst is not None:
            wait, name, bucket = worst
            self.refused[name] += 1
            raise OverLimit(f"rate limit of {bucket.per_minute:g} {name} per minute reached", wait)
        for _, bucket, cost in checks:
            bucket.level -= cost
