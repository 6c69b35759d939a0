"""Measurements of a running OpenAI-compatible server for `evotui sim-calibrate`: streamed
requests at rising concurrency, timed per token arrival, so that time to first token (queueing
plus prompt processing) and decode speed are seen apart.

Each level runs `c` closed-loop clients (a client sends its next request when the last one
ended) for a fixed number of requests each. Requests ask for a fixed output length with
`ignore_eos` (llama.cpp and vLLM honour it), so every request decodes the same number of tokens
and requests of a level decode side by side; a server that rejects the field is asked again
without it and the natural lengths are used. Nothing here fits a model: calibrate_fit.py does.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import httpx

from engine.llm.redact import redact_url

PROMPT_UNIT = "The quick brown fox jumps over the lazy dog while the cat watches from the fence. "
"""About 18 tokens in common tokenizers; repeated to build prompts of a chosen size."""


class ProbeError(Exception):
    """The server could not be measured; the message says what it answered and what to do."""


@dataclass(frozen=True)
class Sample:
    """One streamed request: seconds from sending to the first and last content chunk."""

    concurrency: int
    prompt_tokens: int
    completion_tokens: int
    ttft_s: float
    latency_s: float

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first per second of decoding; None when too short to tell."""
        span = self.latency_s - self.ttft_s
        return (self.completion_tokens - 1) / span if self.completion_tokens > 2 and span > 0 else None


@dataclass
class Level:
    concurrency: int
    wall_s: float
    samples: list[Sample] = field(default_factory=list)

    @property
    def aggregate_tok_s(self) -> float:
        return sum(s.completion_tokens for s in self.samples) / self.wall_s if self.wall_s > 0 else 0.0


@dataclass
class Probe:
    url: str
    model: str
    api_key: str | None = None
    max_tokens: int = 96
    ignore_eos: bool = True
    timeout_s: float = 600.0
    sent: int = 0

    def unique(self, prompt: str) -> str:
        """Every probe prompt starts differently: a server's prefix cache must not shorten prefill."""
        self.sent += 1
        return f"Request {self.sent}. {prompt}"

    def client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.AsyncClient(base_url=self.url.rstrip("/"), headers=headers,
                                 timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                                 limits=httpx.Limits(max_connections=256))

    async def one(self, http: httpx.AsyncClient, prompt: str, concurrency: int, max_tokens: int | None = None,
                  ignore_eos: bool | None = None, token_times: list[float] | None = None,
                  exact: bool = False) -> Sample:
        """One streamed request; token_times (if given) gets the arrival time of each content chunk.
        exact: send the prompt as given (else it gets a unique start, see unique())."""
        try:
            return await self._one(http, prompt if exact else self.unique(prompt), concurrency, max_tokens,
                                   ignore_eos, token_times)
        except httpx.HTTPError as exc:
            raise ProbeError(f"{redact_url(self.url)} could not be measured: {type(exc).__name__}: {exc or 'no detail'}; "
                             "is the server running at that URL?") from None

    async def _one(self, http: httpx.AsyncClient, prompt: str, concurrency: int, max_tokens: int | None,
                   ignore_eos: bool | None, token_times: list[float] | None) -> Sample:
        body: dict = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                      "max_tokens": max_tokens or self.max_tokens, "temperature": 0.7, "stream": True,
                      "stream_options": {"include_usage": True}}
        if self.ignore_eos if ignore_eos is None else ignore_eos:
            body["ignore_eos"] = True
        t0 = time.perf_counter()
        first = last = None
        usage: dict = {}
        chunks = 0
        async with http.stream("POST", "/chat/completions", json=body) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode("utf-8", "replace")[:200]
                raise ProbeError(f"{redact_url(self.url)} answered HTTP {resp.status_code} to a chat request: {text}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    raise ProbeError(f"{redact_url(self.url)} sent a stream line that is not JSON: {data[:80]!r}") from None
                if isinstance(event.get("usage"), dict):
                    usage = event["usage"]
                for choice in event.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        now = time.perf_counter()
                        first = first if first is not None else now
                        last = now
                        chunks += 1
                        if token_times is not None:
                            token_times.append(now)
        if first is None or last is None:
            raise ProbeError(f"{redact_url(self.url)} streamed no content for a probe request; is it a chat model?")
        completion = int(usage.get("completion_tokens") or chunks)
        prompt_tokens = int(usage.get("prompt_tokens") or len(prompt) // 4)
        return Sample(concurrency, prompt_tokens, completion, first - t0, last - t0)

    async def check_ignore_eos(self, http: httpx.AsyncClient) -> None:
        """Drop ignore_eos when the server refuses it (an API that rejects unknown fields)."""
        if not self.ignore_eos:
            return
        try:
            await self.one(http, PROMPT_UNIT, 1, max_tokens=4)
        except ProbeError as exc:
            if "HTTP 400" not in str(exc) and "HTTP 422" not in str(exc):
                raise
            self.ignore_eos = False

    async def level(self, http: httpx.AsyncClient, prompt: str, concurrency: int, per_client: int) -> Level:
        async def client() -> list[Sample]:
            return [await self.one(http, prompt, concurrency) for _ in range(per_client)]

        t0 = time.perf_counter()
        groups = await asyncio.gather(*(client() for _ in range(concurrency)))
        return Level(concurrency, time.perf_counter() - t0, [s for g in groups for s in g])

    async def prefill(self, http: httpx.AsyncClient, sizes: tuple[int, int], repeats: int) -> list[Sample]:
        """Lone requests of two prompt sizes, one output token each: TTFT against prompt length."""
        out = []
        for _ in range(repeats):
            for units in sizes:
                out.append(await self.one(http, PROMPT_UNIT * units, 1, max_tokens=2))
        return out

    async def prefix_cache(self, http: httpx.AsyncClient, prompt: str,
                           rounds: int) -> tuple[list[Sample], list[Sample]]:
        """(repeats, fresh): per round a prompt never sent before, then, once it has completed, the
        same text again. A server with a prefix cache finds all of the repeat's prompt cached."""
        repeats, fresh = [], []
        for _ in range(rounds):
            text = self.unique(prompt)
            fresh.append(await self.one(http, text, 1, max_tokens=2, exact=True))
            repeats.append(await self.one(http, text, 1, max_tokens=2, exact=True))
        return repeats, fresh

    async def decode_during_prefill(self, http: httpx.AsyncClient, long_prompt: str,
                                    warmup_tokens: int = 8) -> tuple[float, float]:
        """(decode tok/s of a lone sequence, its decode tok/s while another request's long prompt
        is prefilled). One sequence decodes; after `warmup_tokens` a long-prompt request is sent,
        and the tokens the first one gets between that send and the second's first token count."""
        times: list[float] = []
        total = max(4 * warmup_tokens, self.max_tokens)
        decoding = asyncio.ensure_future(self.one(http, PROMPT_UNIT, 1, max_tokens=total, token_times=times))
        while len(times) < warmup_tokens and not decoding.done():
            await asyncio.sleep(0.005)
        if decoding.done():
            await decoding
            raise ProbeError("the probe sequence ended before the prefill overlap could be measured; "
                             "raise --decode-tokens")
        t_send = time.perf_counter()
        other = await self.one(http, long_prompt, 2, max_tokens=2)
        await decoding
        t_first = t_send + other.ttft_s
        before = [t for t in times if t <= t_send]
        alone = (len(before) - 1) / (before[-1] - before[0]) if len(before) > 2 and before[-1] > before[0] else 0.0
        during_n = sum(1 for t in times if t_send < t <= t_first)
        during = during_n / (t_first - t_send) if t_first > t_send else 0.0
        return alone, during

    async def lengths(self, http: httpx.AsyncClient, prompts: list[str], max_tokens: int) -> list[int]:
        """Natural output lengths (no ignore_eos) of the given prompts, capped at max_tokens."""
        return [(await self.one(http, p, 1, max_tokens=max_tokens, ignore_eos=False)).completion_tokens
                for p in prompts]


def prompt_of(units: int) -> str:
    return PROMPT_UNIT * max(1, units)
