"""Several endpoints behind one stage ([task_llm] endpoints = [...]): least-loaded routing,
failover and health checks.

Each endpoint is an ordinary LLMClient (its own concurrency limit, retries and CallRecords, so
every attempt is a row in llm_calls with the URL that served or failed it). A request goes to
the healthy endpoint with the lowest load, (in flight + 1) / weight; endpoints at their
concurrency limit are used only when every healthy one is. A request that fails there (after
that endpoint's own retries, at most one with several endpoints) moves to the next endpoint it
has not tried; the failed endpoint rests: it takes no traffic until a health check (GET
/models, every health_interval_s) passes. Only a context overflow is not moved: the same prompt
would not fit elsewhere either. When every endpoint failed the request, the last error stands.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.config import EndpointConfig
from engine.llm.client import LLMClient, Shrink
from engine.llm.errors import LLMError
from engine.llm.records import CallRecord, ChatResult

NOT_MOVED = frozenset({"context_overflow"})


@dataclass
class Route:
    client: LLMClient
    weight: float
    limit: int
    healthy: bool = True
    failures: int = 0
    """Requests that failed here and moved on (or had nowhere to go)."""
    last_error: str = ""
    down_since: float | None = None

    def load(self) -> float:
        return (self.client.in_flight + 1) / self.weight

    @property
    def full(self) -> bool:
        return self.client.in_flight >= self.limit


def route_configs(cfg: EndpointConfig) -> list[EndpointConfig]:
    """Each listed endpoint as a full EndpointConfig: the stage's settings with its overrides."""
    several = len(cfg.endpoints) > 1
    out = []
    for r in cfg.endpoints:
        out.append(cfg.model_copy(update={
            "url": r.url, "model": r.model or cfg.model, "api_key_env": r.api_key_env or cfg.api_key_env,
            "max_concurrency": r.max_concurrency or cfg.max_concurrency, "endpoints": [],
            # Another endpoint is a better retry than the same one again.
            "max_retries": min(cfg.max_retries, 1) if several else cfg.max_retries}))
    return out


class RoutedClient:
    """The LLMClient interface over several endpoints."""

    def __init__(self, cfg: EndpointConfig, *, name: str, on_call: Callable[[CallRecord], None] | None = None,
                 make: Callable[..., LLMClient] = LLMClient) -> None:
        if not cfg.endpoints:
            raise ValueError("RoutedClient needs [endpoints]")
        self.name = name
        self.model = cfg.model
        self._interval = cfg.health_interval_s
        self.routes = [Route(make(c, name=name, on_call=on_call), weight=r.weight, limit=c.max_concurrency)
                       for c, r in zip(route_configs(cfg), cfg.endpoints)]
        self.base_url = " | ".join(r.client.base_url for r in self.routes)
        self.slots: int | None = None
        self.failovers = 0
        """Requests that moved to another endpoint after a failure."""
        self._healers: dict[int, asyncio.Task] = {}

    def __repr__(self) -> str:
        return f"RoutedClient(name={self.name!r}, endpoints={self.base_url!r})"

    # -- the LLMClient figures, summed -------------------------------------------------------------
    @property
    def endpoints(self) -> tuple[LLMClient, ...]:
        return tuple(r.client for r in self.routes)

    @property
    def in_flight(self) -> int:
        return sum(r.client.in_flight for r in self.routes)

    @property
    def calls(self) -> int:
        return sum(r.client.calls for r in self.routes)

    @property
    def errors(self) -> int:
        return sum(r.client.errors for r in self.routes)

    @property
    def retries(self) -> int:
        return sum(r.client.retries for r in self.routes)

    @property
    def shrunk(self) -> int:
        return sum(r.client.shrunk for r in self.routes)

    def match_slots(self, slots: int) -> None:
        return None  # each endpoint matched its own server's slots in check()

    def figures(self) -> list[dict]:
        return [{**r.client.figures()[0], "weight": r.weight, "max_concurrency": r.limit, "healthy": r.healthy,
                 "failures": r.failures, "last_error": r.last_error} for r in self.routes]

    # -- routing -----------------------------------------------------------------------------------
    def pick(self, tried: set[int]) -> int | None:
        """The endpoint for the next attempt: healthy, not tried by this request, least loaded
        (not full before full)."""
        open_ = [i for i, r in enumerate(self.routes) if r.healthy and i not in tried]
        if not open_:
            return None
        return min(open_, key=lambda i: (self.routes[i].full, self.routes[i].load(), i))

    def _down(self, i: int, err: LLMError) -> None:
        route = self.routes[i]
        route.failures += 1
        route.last_error = str(err)[:300]
        if route.healthy:
            route.healthy = False
            route.down_since = time.time()
            if i not in self._healers or self._healers[i].done():
                self._healers[i] = asyncio.get_running_loop().create_task(self._heal(i), name=f"llm-health-{i}")

    async def _heal(self, i: int) -> None:
        """Health checks of a resting endpoint until one passes."""
        route = self.routes[i]
        while not route.healthy:
            await asyncio.sleep(self._interval)
            try:
                await route.client.check()
            except LLMError as exc:
                route.last_error = str(exc)[:300]
                continue
            route.healthy, route.down_since = True, None

    async def chat(self, messages: list[dict], *, stage: str, max_tokens: int | None = None,
                   temperature: float | None = None, seed: int | None = None,
                   shrink: Shrink | None = None) -> ChatResult:
        tried: set[int] = set()
        last: LLMError | None = None
        while True:
            i = self.pick(tried)
            if i is None:
                if last is not None:
                    raise last
                # Every endpoint rests: try the one resting longest rather than fail unseen.
                i = min(range(len(self.routes)), key=lambda k: self.routes[k].down_since or 0.0)
                if i in tried:
                    raise LLMError("connect", f"no endpoint of {self.name} is healthy ({self.base_url})")
            tried.add(i)
            try:
                return await self.routes[i].client.chat(messages, stage=stage, max_tokens=max_tokens,
                                                        temperature=temperature, seed=seed, shrink=shrink)
            except LLMError as exc:
                if exc.kind in NOT_MOVED:
                    raise
                self._down(i, exc)
                last = exc
                if len(tried) < len(self.routes):
                    self.failovers += 1

    # -- set-up and shutdown -------------------------------------------------------------------------
    async def check(self) -> None:
        """Preflight: every endpoint is checked; the ones failing rest (and are checked again
        later); the run stops only when none answers."""
        errors: list[LLMError] = []
        for i, route in enumerate(self.routes):
            try:
                await route.client.check()
            except LLMError as exc:
                errors.append(exc)
                self._down(i, exc)
        if len(errors) == len(self.routes):
            first = errors[0]
            first.fatal = True
            raise first

    async def aclose(self) -> None:
        for task in self._healers.values():
            task.cancel()
        await asyncio.gather(*self._healers.values(), return_exceptions=True)
        for route in self.routes:
            await route.client.aclose()
