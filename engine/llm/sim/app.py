"""The simulated OpenAI-compatible backend as a plain ASGI application.

Works in-process through ``httpx.ASGITransport`` (see ``sim_transport``) and under uvicorn on
loopback. It knows no task: task plug-ins (``behaviours``, see plugins.py) teach it their
request layouts; without them it gives only generic answers. Every response carries
``"system_fingerprint": "evotui-simulated"``: results obtained with it are simulated, not
measurements of a real model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import sys
import time
import uuid
from typing import Any, Awaitable, Callable, Sequence

import httpx

from engine.config import SimConfig
from engine.llm.sim.answer import answer, length_stage, truncate
from engine.llm.sim.plugins import SimBehaviour, message_text
from engine.llm.sim.prefix_cache import prompt_blocks
from engine.llm.sim.clock import Clock, RealClock
from engine.llm.sim.replay import ReplayBook
from engine.llm.sim.serving import Job, LengthSampler, Rejected, make_server

MODEL_ID = "sim-qwen3-8b"
FINGERPRINT = "evotui-simulated"
STAGE_HEADER = b"x-evotui-stage"
DRAW_HEADER = b"x-evotui-draw"
"""A client's key for the request (engine/llm/draws.py): reply and length are drawn from it alone."""
COMMON_DRAWS_STAGE = "heldout"
"""A measuring client's rollouts (the bench's held-out scorer): answered as stage `rollout`,
with randomness from (cfg.seed, the request's seed field) alone, whatever the messages."""

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


def keyed_rng(key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=16).digest(), "big"))


class SimBackendState:
    """Counters and serving state of one simulated backend (read by tests and the bench)."""

    def __init__(self, cfg: SimConfig, clock: Clock) -> None:
        self.cfg = cfg
        self.clock = clock
        self.sampler = LengthSampler(cfg)
        self.server = make_server(cfg, clock, self.sampler)
        self.replay: ReplayBook | None = None  # recorded real replies served again (sim-calibrate --check)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests_served = 0
        self.rejected_429 = 0
        self.bad_requests = 0
        self.truncated = 0
        self.disconnects = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._counter = 0
        # What the server has in hand, for a virtual clock (virtual_clock.py): handlers running,
        # and the job futures handlers wait on (one that is done has a reply to send).
        self.handling = 0
        self.awaiting: set[asyncio.Future] = set()

    def activity(self) -> bool:
        """True while the server itself has work: a request being read or queued, a reply due."""
        return self.handling > 0 or any(f.done() for f in self.awaiting)

    @property
    def capacity(self) -> int:
        """Sequences the backend can run at once (max_num_seqs or the api concurrency cap)."""
        return self.server.capacity

    @property
    def running(self) -> int:
        return self.server.running

    @property
    def waiting(self) -> int:
        return self.server.waiting

    @property
    def peak_running(self) -> int:
        return self.server.peak_running

    @property
    def running_integral(self) -> float:
        return self.server.running_integral

    @property
    def tokens_generated(self) -> int:
        return self.server.tokens_generated

    def sim_now(self) -> float:
        return self.clock.now()

    def elapsed(self) -> float:
        """Simulated seconds since the first request."""
        return self.server.elapsed()

    def mean_running(self) -> float:
        el = self.elapsed()
        return self.running_integral / el if el > 0 else 0.0

    def utilization(self) -> float:
        """Mean running sequences / capacity."""
        return self.mean_running() / self.capacity

    def throughput_utilization(self) -> float:
        """Tokens decoded / what the peak rate could have decoded (vllm: vllm_peak_tok_s)."""
        el = self.elapsed()
        peak = self.cfg.vllm_peak_tok_s if self.cfg.profile == "vllm" else self.cfg.api_tok_s * self.capacity
        return self.tokens_generated / (el * peak) if el > 0 else 0.0

    def next_rng(self, request_seed: object, common: bool = False, draw: str = "") -> random.Random:
        """Per-request answer randomness from (cfg.seed, the request's seed field if any, a
        counter in arrival order). common (stage `heldout`): from (cfg.seed, the seed field)
        alone, so every prompt gets the same draws (common random numbers for a measuring
        client), whatever the order its requests arrive in. draw (an evotui client's draw key):
        from (cfg.seed, the seed field, the key), so a resumed run gets the replies it got before."""
        req = request_seed + 1 if isinstance(request_seed, int) and not isinstance(request_seed, bool) else 0
        if draw and not common:
            return keyed_rng(f"{self.cfg.seed}/{req}/{draw}")
        if common:
            key = hashlib.blake2b(f"{self.cfg.seed}/{req}".encode(), digest_size=16).digest()
            return random.Random(int.from_bytes(key, "big"))
        self._counter += 1
        return random.Random(((self.cfg.seed % 2**32) << 96) | ((req % 2**64) << 32) | (self._counter % 2**32))

    def snapshot(self) -> dict[str, Any]:
        return {
            "profile": self.cfg.profile, "simulated": True, "sim_now": self.sim_now(),
            "elapsed": self.elapsed(), "in_flight": self.in_flight, "peak_in_flight": self.peak_in_flight,
            "running": self.running, "waiting": self.waiting, "capacity": self.capacity,
            "peak_running": self.peak_running,
            "running_integral": self.running_integral, "mean_running": self.mean_running(),
            "utilization": self.utilization(), "throughput_utilization": self.throughput_utilization(),
            "requests_served": self.requests_served, "rejected_429": self.rejected_429,
            "bad_requests": self.bad_requests, "truncated": self.truncated, "disconnects": self.disconnects,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "tokens_generated": self.tokens_generated,
            **self.server.kv_figures(),
            **(self.clock.figures() if hasattr(self.clock, "figures") else {"clock": "wall"}),
            **(self.replay.figures() if self.replay is not None else {}),
        }


class _Disconnected(Exception):
    pass


class _BadRequest(Exception):
    pass


def _json_headers(extra: list[tuple[bytes, bytes]] | None = None) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json")] + (extra or [])


async def _send_json(send: Send, status: int, payload: dict, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _json_headers(extra)})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def _error(message: str, kind: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _sse(payload: dict | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise _Disconnected
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks)


def _parse_chat(body: bytes) -> dict:
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _BadRequest(f"request body is not valid JSON ({exc})") from None
    if not isinstance(req, dict):
        raise _BadRequest("request body must be a JSON object")
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
        raise _BadRequest("'messages' must be a non-empty list of message objects")
    limit = req.get("max_completion_tokens", req.get("max_tokens"))
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise _BadRequest("'max_tokens' must be a positive integer")
    return req


class SimApp:
    """ASGI callable; ``state`` exposes the backend's counters."""

    def __init__(self, cfg: SimConfig, clock: Clock | None = None, behaviours: Sequence[SimBehaviour] = ()) -> None:
        self.cfg = cfg
        self.behaviours = tuple(behaviours)
        self.state = SimBackendState(cfg, clock or RealClock(cfg.time_scale))
        self._driver: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        method = scope["method"]
        if path in ("/v1/chat/completions", "/chat/completions"):
            if method != "POST":
                await _send_json(send, 405, _error("use POST for chat completions", "invalid_request_error"))
                return
            await self._chat(scope, receive, send)
        elif path in ("/v1/models", "/models") and method == "GET":
            await _send_json(send, 200, {"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": FINGERPRINT}]})
        elif path == "/health" and method == "GET":
            await _send_json(send, 200, {"status": "ok", "simulated": True})
        elif path in ("/v1/sim/metrics", "/sim/metrics") and method == "GET":
            await _send_json(send, 200, self.state.snapshot())
        else:
            await _send_json(send, 404, _error(f"no route {method} {path}", "not_found_error"))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                drive = getattr(self.state.clock, "drive", None)  # a virtual clock moves by looking
                if drive is not None:
                    self._driver = asyncio.create_task(drive(self.state.activity, _warn), name="sim-virtual-clock")
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                if self._driver is not None:
                    self._driver.cancel()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _chat(self, scope: dict, receive: Receive, send: Send) -> None:
        self.state.handling += 1
        try:
            await self._chat_handled(scope, receive, send)
        finally:
            self.state.handling -= 1

    async def _chat_handled(self, scope: dict, receive: Receive, send: Send) -> None:
        st = self.state
        try:
            req = _parse_chat(await _read_body(receive))
        except _Disconnected:
            st.disconnects += 1
            return
        except _BadRequest as exc:
            st.bad_requests += 1
            await _send_json(send, 400, _error(str(exc), "invalid_request_error"))
            return
        if st.server.full():
            st.rejected_429 += 1
            await _send_json(send, 429, _error(f"rate limited: more than {st.capacity} concurrent requests",
                                               "rate_limit_error", "rate_limited"), [(b"retry-after", b"1")])
            return
        headers = dict(scope.get("headers") or [])
        stage = headers.get(STAGE_HEADER, b"default").decode("latin-1").strip() or "default"
        common = stage == COMMON_DRAWS_STAGE
        stage = "rollout" if common else stage
        messages = req["messages"]
        recorded = st.replay.take(messages) if st.replay is not None else None
        if recorded is not None:  # a real model's reply to these messages: its text and lengths
            text, finish_reason = recorded.text, recorded.finish_reason
            prompt_tokens, tokens = max(1, recorded.prompt_tokens), max(1, recorded.completion_tokens)
        else:
            text, prompt_tokens, tokens, finish_reason = self._own_reply(req, stage, common, headers)
        blocks = prompt_blocks(messages) if st.server.prefix_cache is not None else ()
        job = Job(prompt_tokens=prompt_tokens, tokens=tokens, blocks=blocks)
        try:
            st.server.submit(job)
        except Rejected as exc:
            st.rejected_429 += 1
            # A per-minute limit states its wait in simulated seconds; the client waits in wall time.
            wait = "1" if exc.retry_after_s is None else f"{exc.retry_after_s / self.state.cfg.time_scale:.3f}"
            await _send_json(send, 429, _error(f"rate limited: {exc}", "rate_limit_error", "rate_limited"),
                             [(b"retry-after", wait.encode())])
            return
        st.in_flight += 1
        st.peak_in_flight = max(st.peak_in_flight, st.in_flight)
        watcher = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            reply = _Reply(req.get("model") or MODEL_ID, text, finish_reason, prompt_tokens, tokens)
            if req.get("stream"):
                await _until(st, job.first_fut, watcher)
                await reply.stream_start(send)
                await _until(st, job.done_fut, watcher)
                await reply.stream_end(send)
            else:
                await _until(st, job.done_fut, watcher)
                await _send_json(send, 200, reply.body(),
                                 [(b"x-evotui-sim-seconds", f"{job.latency:.4f}".encode())])
            st.requests_served += 1
            st.prompt_tokens += prompt_tokens
            st.completion_tokens += tokens
            st.truncated += finish_reason == "length"
        except _Disconnected:
            st.disconnects += 1
        finally:
            st.in_flight -= 1
            watcher.cancel()
            if job.finish is None:
                st.server.abort(job)


    def _own_reply(self, req: dict, stage: str, common: bool, headers: dict) -> tuple[str, int, int, str]:
        """The simulator's own answer to a request: (text, prompt tokens, completion tokens, finish reason)."""
        st, messages = self.state, req["messages"]
        prompt_tokens = max(1, math.ceil(sum(len(message_text(m.get("content"))) for m in messages) / 4))
        draw = headers.get(DRAW_HEADER, b"").decode("latin-1").strip()
        # A keyed request draws its length from its own key too (arrival order then changes nothing).
        length_rng = keyed_rng(f"{st.cfg.seed}/length/{draw}") if draw and not common else None
        tokens, finish_reason = st.sampler.sample(length_stage(messages, stage), length_rng), "stop"
        limit = req.get("max_completion_tokens", req.get("max_tokens"))
        if limit is not None and tokens > limit:
            tokens, finish_reason = limit, "length"
        text = answer(messages, stage, st.next_rng(req.get("seed"), common, draw), self.behaviours)
        if finish_reason == "length":
            text = truncate(text)
        return text, prompt_tokens, tokens, finish_reason


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _until(st: SimBackendState, fut: asyncio.Future | None, watcher: asyncio.Future) -> None:
    """Wait for a job's future; meanwhile the handler is not the server's work in hand."""
    assert fut is not None
    if not fut.done():
        st.handling -= 1
        st.awaiting.add(fut)
        try:
            await asyncio.wait((fut, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            st.awaiting.discard(fut)
            st.handling += 1
    if not fut.done():
        raise _Disconnected


def _warn(line: str) -> None:
    print(f"evotui sim-server: {line}", file=sys.stderr, flush=True)


class _Reply:
    def __init__(self, model: str, text: str, finish_reason: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.id = f"chatcmpl-sim-{uuid.uuid4().hex[:16]}"
        self.created = int(time.time())
        self.model, self.text, self.finish_reason = model, text, finish_reason
        self.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": FINGERPRINT}

    def body(self) -> dict:
        return {**self._head("chat.completion"), "usage": self.usage, "choices": [
            {"index": 0, "message": {"role": "assistant", "content": self.text},
             "finish_reason": self.finish_reason, "logprobs": None}]}

    def _chunk(self, delta: dict, finish_reason: str | None = None, usage: dict | None = None) -> bytes:
        payload = {**self._head("chat.completion.chunk"),
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]}
        if usage is not None:
            payload["usage"] = usage
        return _sse(payload)

    async def stream_start(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": self._chunk({"role": "assistant", "content": ""}),
                    "more_body": True})

    async def stream_end(self, send: Send) -> None:
        pieces = self.text.splitlines(keepends=True) or [""]
        body = b"".join(self._chunk({"content": p}) for p in pieces if p)
        body += self._chunk({}, self.finish_reason, self.usage) + _sse("[DONE]")
        await send({"type": "http.response.body", "body": body, "more_body": False})


def create_sim_app(cfg: SimConfig, clock: Clock | None = None, *,
                   behaviours: Sequence[SimBehaviour] = (), replay: ReplayBook | None = None) -> SimApp:
    """The backend; ``behaviours`` are task plug-ins asked before the generic answers, in order;
    ``replay``: recorded replies served to the requests they answered (engine/llm/sim/replay.py)."""
    app = SimApp(cfg, clock, behaviours)
    app.state.replay = replay
    return app


def sim_transport(cfg: SimConfig, clock: Clock | None = None, *,
                  behaviours: Sequence[SimBehaviour] = ()) -> tuple[httpx.ASGITransport, SimBackendState]:
    """In-process transport for the engine; use it with base_url ``http://sim/v1``."""
    app = create_sim_app(cfg, clock, behaviours=behaviours)
    return httpx.ASGITransport(app=app), app.state
