"""OpenAI-compatible chat client: bounded concurrency, retries with jittered backoff, SSE streaming.

Every chat() reports exactly one CallRecord through on_call (success, "length", final error, or
"cancelled" when a stop or an already decided step cancels it mid-flight), carrying the messages
sent and the response text (none for an error or a cancel). The API key is read from the
environment per request. Credentials in the URL (userinfo, key-like query values) are sent but
never shown: base_url, CallRecords and every error message carry the redacted URL, and each message
is scrubbed of the key and the URL's secrets (servers and httpx echo them).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable

import httpx

from engine.config import SIM_URL, EndpointConfig
from engine.llm.draws import DRAW_HEADER, DrawKeys
from engine.llm.errors import LLMError, bad_response, looks_like_html, one_line, status_error, transport_error
from engine.llm.records import CallRecord, ChatResult
from engine.llm.redact import redact_url, url_secrets
from engine.llm.wire import (NoCookies, Reply, basic_auth, estimate_tokens, message_chars, parse_completion,
                             read_sse, usage_int)

__all__ = ["CallRecord", "ChatResult", "LLMClient", "Shrink"]

SIM_BASE_URL = "http://sim/v1"


Shrink = Callable[[list[dict], LLMError], "list[dict] | None"]
"""A caller's truncation rule: (messages, the context_overflow error) -> shorter messages, or
None when nothing can be cut. See engine.llm.shrink."""


CANCELLED_ERROR = "cancelled: no longer needed (the run stopped, or its step was already decided)"
RETRY_AFTER_MAX_S = 120.0
"""A server's Retry-After is honoured up to this (backoff_max_s only bounds our own backoff): a
rate-limited API that says "in 20 s" refuses every earlier retry."""
RATE_LIMIT_WAIT_MAX_S = 900.0
"""A 429 that states its wait is the account's per-minute limit pacing us, not a failure: such
retries do not count against max_retries, until one call has waited this long in total."""


def cached_prompt_tokens(usage: dict | None) -> int:
    """OpenAI's usage.prompt_tokens_details.cached_tokens (0 when the server does not report it)."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    return usage_int(details, "cached_tokens") or 0


class LLMClient:
    def __init__(
        self,
        cfg: EndpointConfig,
        *,
        name: str,
        transport: httpx.AsyncBaseTransport | None = None,
        base_url: str | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] | None = None,
        draw_salt: str = "",
    ) -> None:
        if base_url is None and cfg.url == SIM_URL:
            if transport is None:
                raise ValueError("url sim:// needs the simulator's transport")
            base_url = SIM_BASE_URL
        raw = base_url or cfg.url
        try:
            base = httpx.URL(raw)
        except httpx.InvalidURL as exc:  # fatal like a refused connection, and shown redacted
            raise LLMError("connect", f"invalid URL {redact_url(raw)} ({exc}); fix --llm-url", fatal=True) from None
        # Userinfo becomes our own Basic header, so no request URL (which httpx puts in its
        # exceptions and logs) holds it; key-like query parameters have to stay in the URL.
        self._basic = basic_auth(base)
        self._base = base.copy_with(username=None, password=None, path=base.path.rstrip("/"))
        self._url_secrets = url_secrets(raw) + ((self._basic.split(" ", 1)[1],) if self._basic else ())
        self.base_url = redact_url(str(self._base).rstrip("/"))
        """The endpoint as shown everywhere (messages, CallRecords, snapshots): no credentials."""
        self.name = name
        self.model = cfg.model
        self.notices: list[str] = []
        """What the preflight found worth a warning but not a refusal (a model the server does not list)."""
        self._cfg = cfg
        self._on_call = on_call
        self._sleep = sleep
        self._rng = rng or random.Random()
        # The hold needs a clock that moves with `sleep`: a caller that injects a sleep (a fake
        # clock) without its clock gets no hold.
        self._monotonic = monotonic or (time.monotonic if sleep is asyncio.sleep else None)
        self._hold_until = 0.0
        """A rate limit's Retry-After holds every request of this client until then, so that
        concurrent requests do not all retry into the same limit at once."""
        self._draws = DrawKeys(draw_salt)
        """Keys a simulator seeds each reply from (engine/llm/draws.py): resumes reproduce replies."""
        self._sem = asyncio.Semaphore(cfg.max_concurrency)
        timeout = httpx.Timeout(
            connect=cfg.connect_timeout_s, read=cfg.read_timeout_s,
            write=cfg.connect_timeout_s, pool=cfg.read_timeout_s,
        )
        # The semaphore bounds requests, so the pool never needs more connections than that.
        limits = httpx.Limits(max_connections=cfg.max_concurrency, max_keepalive_connections=cfg.max_concurrency)
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout, limits=limits, cookies=NoCookies())
        self._in_flight = self._calls = self._errors = self._retries = self._shrunk = 0
        self.slots: int | None = None
        """Slots the server reported (llama.cpp /props total_slots); concurrency is capped to it."""

    def __repr__(self) -> str:
        return f"LLMClient(name={self.name!r}, url={self.base_url!r}, model={self.model!r})"

    @property
    def in_flight(self) -> int:
        """Calls holding a concurrency slot (requests on the wire or backing off before a retry)."""
        return self._in_flight

    @property
    def calls(self) -> int:
        """Finished chat() calls, each reported through on_call."""
        return self._calls

    @property
    def errors(self) -> int:
        return self._errors

    @property
    def retries(self) -> int:
        return self._retries

    @property
    def shrunk(self) -> int:
        """Calls whose prompt was shrunk after a context overflow."""
        return self._shrunk

    @property
    def endpoints(self) -> tuple[LLMClient, ...]:
        """The servers behind this client: itself (a RoutedClient has several)."""
        return (self,)

    def figures(self) -> list[dict]:
        """Per-endpoint figures for the run's summary (one endpoint here)."""
        return [{"stage": self.name, "url": self.base_url, "model": self.model, "in_flight": self._in_flight,
                 "calls": self._calls, "errors": self._errors, "retries": self._retries}]

    def match_slots(self, slots: int) -> None:
        """Send at most `slots` requests at once (the server queues the rest, which would count
        against our timeouts). Only before the first chat()."""
        if slots < self._cfg.max_concurrency and self._in_flight == 0:
            self._sem = asyncio.Semaphore(slots)
        self.slots = slots

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- helpers ---------------------------------------------------------------------------------

    def _api_key(self) -> str | None:
        env = self._cfg.api_key_env
        return (os.environ.get(env) or None) if env else None

    def _secrets(self) -> tuple[str | None, ...]:
        """What no message may show: the API key and the URL's credentials."""
        return (self._api_key(), *self._url_secrets)

    def _url(self, path: str, *, root: bool = False) -> httpx.URL:
        """An endpoint route (keeps the base's query, which may hold a key); root: without /v1."""
        base = self._base.path
        if root and base.endswith("/v1"):
            base = base[: -len("/v1")]
        return self._base.copy_with(path=base + path)

    def _headers(self, stage: str | None = None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if stage is not None:
            headers["X-Evotui-Stage"] = stage
        key = self._api_key()
        # An explicit key wins over the URL's userinfo (httpx would let the userinfo win).
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif self._basic:
            headers["Authorization"] = self._basic
        return headers

    def _status_error(self, resp: httpx.Response) -> LLMError:
        return status_error(resp.status_code, resp.text, resp.headers.get("retry-after"), url=self.base_url,
                            model=self.model, api_key_env=self._cfg.api_key_env,
                            url_credentials=self._basic is not None and not self._api_key())

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = self._cfg.backoff_max_s
        if retry_after is not None:
            return min(retry_after, max(cap, RETRY_AFTER_MAX_S))
        return self._rng.uniform(0.0, min(cap, self._cfg.backoff_base_s * 2**attempt))

    async def _wait_for_hold(self, waited_until: float) -> None:
        """Wait out a hold set by another request's 429 (not one this request already slept for)."""
        if self._monotonic is not None and self._hold_until > waited_until:
            wait = self._hold_until - self._monotonic()
            if wait > 0:
                await self._sleep(wait)

    # -- requests --------------------------------------------------------------------------------

    async def _attempt(self, payload: dict, headers: dict[str, str]) -> Reply:
        """One request. Timeouts: connect and between-bytes reads (httpx), first token
        (streaming), and the whole attempt (total_timeout_s); each is retried as a timeout."""
        total = self._cfg.total_timeout_s
        try:
            async with asyncio.timeout(total):
                return await self._attempt_once(payload, headers)
        except TimeoutError:
            raise LLMError("timeout", f"{self.base_url} did not finish a request within total_timeout_s="
                           f"{total:g}s; raise total_timeout_s or lower max_tokens", retryable=True) from None

    async def _attempt_once(self, payload: dict, headers: dict[str, str]) -> Reply:
        url = self._url("/chat/completions")
        t0 = time.perf_counter()
        if not payload["stream"]:
            resp = await self._http.post(url, json=payload, headers=headers)
            if not resp.is_success:
                raise self._status_error(resp)
            return parse_completion(resp.text, resp.headers.get("content-type"), self.base_url)
        wait = self._cfg.first_token_timeout_s
        try:
            async with asyncio.timeout(wait) as first:
                async with self._http.stream("POST", url, json=payload, headers=headers) as resp:
                    if not resp.is_success:
                        await resp.aread()
                        raise self._status_error(resp)
                    kind = resp.headers.get("content-type", "")
                    if kind.startswith("application/json") or looks_like_html("", kind):
                        await resp.aread()  # server ignored stream=true, or a proxy's page
                        return parse_completion(resp.text, kind, self.base_url)
                    return await read_sse(resp, t0, first, self.base_url)
        except TimeoutError:
            if not first.expired():
                raise
            raise LLMError("timeout", f"no first token from {self.base_url} within first_token_timeout_s={wait:g}s "
                           "(queued or slow prompt processing); raise first_token_timeout_s or shorten the "
                           "prompt", retryable=True) from None

    async def _attempts(self, payload: dict, headers: dict[str, str]) -> tuple[Reply | None, LLMError | None, int]:
        """Retry transient failures; return the reply or the final error (not raised, so it carries no
        chained httpx exception whose request holds the Authorization header)."""
        retries = failures = 0
        rate_waited = 0.0
        waited_until = 0.0
        while True:
            err: LLMError | None = None
            try:
                await self._wait_for_hold(waited_until)
                return await self._attempt(payload, headers), None, retries
            except LLMError as exc:
                err = exc.with_traceback(None)  # its frames hold the headers, its context the body
                err.__context__ = err.__cause__ = None
            except httpx.RequestError as exc:
                err = transport_error(exc, self.base_url)
            err.redact(*self._secrets())
            if not err.retryable:
                return None, err, retries
            paced = err.kind == "rate_limited" and err.retry_after is not None and rate_waited < RATE_LIMIT_WAIT_MAX_S
            if not paced and failures >= self._cfg.max_retries:
                return None, err.gave_up(retries), retries
            delay = self._backoff(failures, err.retry_after)
            if paced:
                rate_waited += delay
            else:
                failures += 1
            waited_until = (self._monotonic() if self._monotonic else 0.0) + delay
            if err.retry_after is not None:
                self._hold_until = max(self._hold_until, waited_until)
            retries += 1
            self._retries += 1
            await self._sleep(delay)

    async def chat(self, messages: list[dict], *, stage: str, max_tokens: int | None = None,
                   temperature: float | None = None, seed: int | None = None,
                   shrink: Shrink | None = None) -> ChatResult:
        """One chat completion. shrink: on a context overflow, the caller's rule shortens the
        prompt and the request is tried once more (in the same slot and the same CallRecord)."""
        payload: dict = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens if max_tokens is not None else self._cfg.max_tokens,
            "temperature": temperature if temperature is not None else self._cfg.temperature,
            "stream": self._cfg.stream,
        }
        if seed is not None:
            payload["seed"] = seed
        if self._cfg.stream:
            payload["stream_options"] = {"include_usage": True}
        # Taken before the semaphore: the order calls enter chat() is the order the caller made them.
        headers = {**self._headers(stage), DRAW_HEADER: self._draws.key(self.name, stage, messages)}
        async with self._sem:
            self._in_flight += 1
            started_at, t0 = time.time(), time.perf_counter()
            shrunk = False
            retries = 0
            try:
                reply, err, retries = await self._attempts(payload, headers)
                if reply is None and err is not None and err.kind == "context_overflow" and shrink is not None:
                    smaller = shrink(messages, err)
                    if smaller is not None and smaller != messages:
                        messages, shrunk = smaller, True
                        self._shrunk += 1
                        reply, err, more = await self._attempts({**payload, "messages": smaller}, headers)
                        retries += 1 + more
                        if err is not None and err.kind == "context_overflow":
                            err.message += " (still too long after shrinking the prompt once)"
                            err.args = (err.message,)
            except asyncio.CancelledError:
                # A stop, or a chain step whose gate was already decided, cancelled the request
                # mid-flight: it was sent (and maybe served), so it is counted and recorded like
                # any other call (the endpoint's figures and the llm_calls rows agree).
                self._calls += 1
                self._report(CallRecord(status="cancelled", finish_reason=None, prompt_tokens=0,
                                        completion_tokens=0, ttft_s=None, error=CANCELLED_ERROR,
                                        endpoint=self.name, url=self.base_url, model=self.model, stage=stage,
                                        latency_s=time.perf_counter() - t0, retries=retries,
                                        started_at=started_at, messages=messages))
                raise
            finally:
                self._in_flight -= 1
        latency = time.perf_counter() - t0
        self._calls += 1
        record = dict(endpoint=self.name, url=self.base_url, model=self.model, stage=stage,
                      latency_s=latency, retries=retries, started_at=started_at, messages=messages)
        if reply is None:
            assert err is not None
            self._errors += 1
            err.retries = retries
            self._report(CallRecord(status="error", finish_reason=None, prompt_tokens=0, completion_tokens=0,
                                    ttft_s=None, error=str(err), **record))
            raise err
        prompt = usage_int(reply.usage, "prompt_tokens")
        completion = usage_int(reply.usage, "completion_tokens")
        prompt = prompt if prompt is not None else estimate_tokens(message_chars(messages))
        completion = completion if completion is not None else estimate_tokens(len(reply.text))
        self._report(CallRecord(status="length" if reply.finish_reason == "length" else "ok",
                                finish_reason=reply.finish_reason, prompt_tokens=prompt,
                                completion_tokens=completion, ttft_s=reply.ttft_s, error=None,
                                response=reply.text, cached_tokens=min(cached_prompt_tokens(reply.usage), prompt),
                                **record))
        return ChatResult(reply.text, reply.finish_reason, prompt, completion, latency, retries, shrunk)

    def _report(self, rec: CallRecord) -> None:
        if self._on_call is not None:
            self._on_call(rec)

    async def check(self) -> None:
        """Preflight: the server answers and serves cfg.model; any problem is a fatal LLMError."""
        err = await self._check()
        if err is not None:
            err.fatal = True
            raise err.redact(*self._secrets())

    async def _probe_slots(self) -> None:
        """llama.cpp's GET /props reports total_slots: cap our concurrency to it. Other servers
        have no such route (or another body), which leaves max_concurrency as configured."""
        try:
            resp = await self._http.get(self._url("/props", root=True), headers=self._headers())
            data = json.loads(resp.text) if resp.is_success else None
        except (httpx.HTTPError, ValueError):
            return None  # optional probe: the chat requests will show any real problem
        slots = data.get("total_slots") if isinstance(data, dict) else None
        if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
            self.match_slots(slots)
        return None

    async def _check(self) -> LLMError | None:
        try:
            resp = await self._http.get(self._url("/models"), headers=self._headers())
        except httpx.RequestError as exc:
            return transport_error(exc, self.base_url)
        if resp.status_code in (404, 405):
            return await self._probe_slots()  # no /models route; chat() reports a bad model later
        if not resp.is_success:
            return self._status_error(resp)
        try:
            data = json.loads(resp.text)
        except ValueError:
            return bad_response(self.base_url, f"GET /models is not JSON ({one_line(resp.text, 60)!r})")
        listed = data.get("data") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            return await self._probe_slots()  # not a model list we understand: nothing to verify
        models = [m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
        ids = [m["id"] for m in models]
        aliases = {a for m in models for a in (m.get("aliases") or []) if isinstance(a, str)}
        if not ids or self.model in ids or self.model in aliases:
            return await self._probe_slots()
        if len(models) == 1 and models[0].get("owned_by") == "llamacpp":
            return await self._probe_slots()  # llama.cpp serves one model and ignores `model`
        # Servers route names they do not list (aliases, OpenRouter-style providers, proxies): the
        # first request decides, and a 404 there is the fatal model_not_found.
        shown = ", ".join(ids[:10]) + (f" (+{len(ids) - 10} more)" if len(ids) > 10 else "")
        self.notices.append(f"model '{self.model}' is not listed at {self.base_url} (available: {shown}); "
                            "sending it anyway, the server decides (pass --model with one of them if it refuses)")
        return await self._probe_slots()
