"""The OpenAI-compatible wire format as the chat client reads it: completion bodies and
server-sent-event streams parsed into a Reply, token counts when the server sends no usage, and
two HTTP details (userinfo sent as a Basic header, no cookie jar).

Separate from engine.llm.client so the client holds the request policy (concurrency, retries,
timeouts, reporting) and this module the format; nothing here holds state between requests.
Errors are LLMErrors naming the (redacted) base_url the caller passes in.
"""

from __future__ import annotations

import asyncio
import base64
import http.cookiejar
import json
import math
import time
from dataclasses import dataclass

import httpx

from engine.llm.errors import LLMError, bad_response, error_detail, looks_like_html, one_line, truncated_stream


@dataclass
class Reply:
    """A completion as read off the wire, before it becomes a CallRecord and a ChatResult."""

    text: str
    finish_reason: str | None
    usage: dict | None
    ttft_s: float | None = None


def estimate_tokens(chars: int) -> int:
    """A rough count (about four characters a token) for servers that report no usage."""
    return math.ceil(chars / 4)


def usage_int(usage: dict | None, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value >= 0 else None


def message_chars(messages: list[dict]) -> int:
    total = 0
    for msg in messages:
        content = msg.get("content")
        total += len(content) if isinstance(content, str) else len(json.dumps(content))
    return total


def basic_auth(url: httpx.URL) -> str | None:
    """The Authorization value for a URL's userinfo (http://user:KEY@host), as httpx would send it."""
    if not url.userinfo:
        return None
    pair = f"{url.username}:{url.password}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


class NoCookies(http.cookiejar.CookieJar):
    """Chat endpoints are stateless: keep no cookies (a server cannot pin state on us), and skip
    the per-response cookie parsing that was a tenth of the in-process request cost."""

    def extract_cookies(self, response, request) -> None:  # noqa: ARG002 - nothing to keep
        return None


def parse_completion(body: str, content_type: str | None, base_url: str) -> Reply:
    """A non-streamed chat completion's body; base_url (redacted) names the server in errors."""
    # A cut, empty or HTML body and a reply without choices come from overloaded servers,
    # proxies and gateways, and are retried; a well-formed reply of the wrong shape is not.
    if not body.strip():
        raise bad_response(base_url, "empty body", retryable=True)
    if looks_like_html(body, content_type):
        raise bad_response(base_url, f"an HTML page instead of JSON, from a proxy or gateway? "
                           f"({one_line(body, 60)!r})", retryable=True)
    try:
        data = json.loads(body)
    except ValueError:
        raise bad_response(base_url, f"body is not JSON, or cut short ({one_line(body, 60)!r})",
                           retryable=True) from None
    if not isinstance(data, dict):
        raise bad_response(base_url, "JSON body is not an object", retryable=True)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad_response(base_url, "no choices" + (f" ({error_detail(body)})" if "error" in data else ""),
                           retryable=True)
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    if content is not None and not isinstance(content, str):
        raise bad_response(base_url, "message content is not text")
    return Reply(content or "", choices[0].get("finish_reason"), data.get("usage"))


async def read_sse(resp: httpx.Response, t0: float, first: asyncio.Timeout | None, base_url: str) -> Reply:
    """A streamed completion (server-sent events) from t0 on; first: the first-token deadline,
    met at the first content or reasoning."""
    parts: list[str] = []
    finish: str | None = None
    usage: dict | None = None
    ttft: float | None = None
    chunks, done = 0, False
    choices = 0  # chunks that carried the first choice: a stream without one has no answer at all
    unreadable: str | None = None  # a chunk that is not JSON: cut short if nothing follows it
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue  # blank separators, ": keep-alive" comments, event:/id: fields
        if unreadable is not None:
            raise bad_response(base_url, f"stream chunk is not JSON ({one_line(unreadable, 60)!r})",
                               retryable=True)
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            unreadable = data
            continue
        if not isinstance(chunk, dict):
            raise bad_response(base_url, "stream chunk is not an object", retryable=True)
        if chunk.get("error"):
            raise LLMError("server", f"{base_url} failed mid-stream ({error_detail(data)})",
                           retryable=True)
        chunks += 1
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            choices += 1
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if (content or delta.get("reasoning_content") or delta.get("reasoning")) and ttft is None:
                ttft = time.perf_counter() - t0
                if first is not None:
                    first.reschedule(None)  # the first-token deadline is met
            if isinstance(content, str):
                parts.append(content)
            finish = choice.get("finish_reason") or finish
    if unreadable is not None:
        raise truncated_stream(base_url, f"cut inside a chunk ({one_line(unreadable, 60)!r})")
    if chunks == 0 and not done:
        raise truncated_stream(base_url, "no chunks, no [DONE]")
    if chunks == 0:
        raise bad_response(base_url, "empty stream", retryable=True)
    if choices == 0:
        # Like a non-streamed reply without choices: garbage a retry may not get again, never an empty answer.
        raise bad_response(base_url, f"no choices in the stream ({chunks} chunks)", retryable=True)
    if not done and finish is None:
        raise truncated_stream(base_url, f"ended before [DONE] and any finish_reason, after {chunks} chunks")
    return Reply("".join(parts), finish, usage, ttft)
