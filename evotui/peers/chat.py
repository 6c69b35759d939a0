"""The chat client a peer's user writes: plain OpenAI-compatible requests, no evotui headers or
seeds, so the simulated backend reads the peer's requests exactly as it reads anyone's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

MODEL = "sim-qwen3-8b"


TRANSPORT_RETRIES = 2
"""Retries of a request whose connection failed, as the OpenAI SDK makes by default: a server
may close an idle keep-alive connection just as the client reuses it (uvicorn closes them after
5 s, the default `evotui sim-server` keeps), the likely cause of a 200-proposal PxN bench run
that failed with "Server disconnected without sending a response"."""


class Chat:
    """`chat(prompt_or_messages) -> text`; `batch_complete(list of messages) -> texts`, sent at
    once (what GEPA's own LM does with litellm.batch_completion)."""

    def __init__(self, url: str, max_workers: int = 64, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(timeout=httpx.Timeout(600.0, connect=10.0), transport=transport,
                                  limits=httpx.Limits(max_connections=max_workers))
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="peer-chat")
        self.calls = 0
        self.retries = 0

    def complete(self, messages: list[dict]) -> str:
        body = {"model": MODEL, "messages": messages, "temperature": 0.7}
        for attempt in range(TRANSPORT_RETRIES + 1):
            try:
                r = self._http.post(f"{self.url}/chat/completions", json=body)
                break
            except httpx.TransportError:
                if attempt == TRANSPORT_RETRIES:
                    raise
                self.retries += 1  # at once, on a new connection (the failed one left the pool)
        r.raise_for_status()
        self.calls += 1
        return r.json()["choices"][0]["message"]["content"] or ""

    def __call__(self, prompt: str | list[dict]) -> str:
        return self.complete([{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt)

    def batch_complete(self, messages_list: list[list[dict]]) -> list[str]:
        return list(self._pool.map(self.complete, messages_list))

    def map(self, fn, items: list) -> list:
        """fn over items at once, on this client's threads (a minibatch's examples)."""
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._http.close()
