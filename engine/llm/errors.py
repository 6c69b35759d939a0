"""LLMError and the small helpers that turn HTTP failures into one-line, actionable messages."""

from __future__ import annotations

import json
import re
import time
from email.utils import parsedate_to_datetime

import httpx

from engine.llm.redact import redact_text

KINDS = (
    "connect",
    "timeout",
    "rate_limited",
    "server",
    "bad_request",
    "context_overflow",
    "auth",
    "model_not_found",
    "bad_response",
    "truncated_stream",
)

# Phrases servers use when the prompt does not fit (OpenAI, vLLM, llama.cpp, SGLang, TGI wordings).
_CONTEXT_RE = re.compile(
    r"context[ _-]?length|maximum context|context window|context size|exceeds the context"
    r"|prompt is too long|too many tokens|maximum input length",
    re.IGNORECASE,
)
_DETAIL_MAX = 200


def one_line(text: str, limit: int = _DETAIL_MAX) -> str:
    """Collapse whitespace so messages stay on one line, and cut long server text."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class LLMError(Exception):
    """A failed LLM request.

    kind: one of KINDS. fatal: the run must stop and show `message` (bad credentials, unknown
    model, unreachable server). retryable: the client may retry it (transient failures only).
    """

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        fatal: bool = False,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        retries: int = 0,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}")
        self.kind = kind
        self.message = one_line(message, limit=1000)
        self.fatal = fatal
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.retries = retries
        self.prompt_tokens: int | None = None
        """context_overflow: the prompt's size in tokens, when the server said it (llama.cpp does)."""
        self.context_tokens: int | None = None
        """context_overflow: the context the prompt had to fit in, when the server said it."""
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, fatal={self.fatal}, status={self.status}, message={self.message!r})"

    def redact(self, *secrets: str | None) -> LLMError:
        """Scrub the credentials from the message: any URL's userinfo and key-like query values
        (httpx and servers echo the request URL), and each secret (the API key, the URL's password)
        wherever a server may have echoed it."""
        clean = redact_text(self.message, secrets)
        if clean != self.message:
            self.message = clean
            self.args = (clean,)
        return self

    def gave_up(self, retries: int) -> LLMError:
        """The final error after retrying: an unreachable server stops the run, other kinds fail one call."""
        suffix = f" (gave up after {retries} retries)" if retries else ""
        return LLMError(
            self.kind,
            self.message + suffix,
            fatal=self.fatal or self.kind == "connect",
            retryable=False,
            status=self.status,
            retries=retries,
        )


def error_detail(body: str) -> str:
    """The server's own error text: OpenAI-style {"error": {"message": ..}}, {"detail": ..} or raw body."""
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body) or "empty body"
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err
        if err:
            return one_line(err if isinstance(err, str) else json.dumps(err))
    return one_line(body)


def is_context_overflow(text: str) -> bool:
    return bool(_CONTEXT_RE.search(text))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def bad_response(url: str, what: str, *, retryable: bool = False) -> LLMError:
    """A success status with a body we cannot use. retryable: garbage that a retry may not get
    again (cut or empty JSON, a proxy's HTML page, no choices); the rest is the server's format."""
    return LLMError("bad_response", f"unexpected response from {url}: {what}; "
                    "check that the URL points to an OpenAI-compatible /v1 API", retryable=retryable)


def truncated_stream(url: str, what: str) -> LLMError:
    """A stream that ended before the server said it was done: the connection was cut (a proxy's
    idle timeout, a restarting server). Retried, since the next attempt usually completes."""
    return LLMError("truncated_stream", f"the stream from {url} was cut short ({what}); "
                    "the server or a proxy between us closed it", retryable=True)


def looks_like_html(body: str, content_type: str | None = None) -> bool:
    """A proxy's or gateway's page (login, error, captive portal) instead of an API answer."""
    if content_type and content_type.split(";")[0].strip().lower() in ("text/html", "application/xhtml+xml"):
        return True
    return body.lstrip().startswith("<")


def status_error(status: int, body: str, retry_after: str | None, *, url: str, model: str,
                 api_key_env: str | None, url_credentials: bool = False) -> LLMError:
    """Map a non-2xx answer to an error: 429/5xx/408 are transient, 401/403/404/other 4xx stop the run.
    url_credentials: the request authenticated with the URL's user:password (no API key was set)."""
    detail = error_detail(body)
    wait = parse_retry_after(retry_after)
    if status == 429:
        return LLMError("rate_limited", f"rate limited by {url} (HTTP 429: {detail})", status=status,
                        retryable=True, retry_after=wait)
    if status >= 500:
        return LLMError("server", f"server error from {url} (HTTP {status}: {detail})", status=status,
                        retryable=True, retry_after=wait)
    if status == 408:
        return LLMError("timeout", f"{url} timed out the request (HTTP 408)", status=status, retryable=True)
    if status in (401, 403):
        if url_credentials:
            fix = "check the user and password in the URL"
        elif api_key_env:
            fix = f"check the key in ${api_key_env}"
        else:
            fix = "set api_key_env to the variable holding the key"
        return LLMError("auth", f"{url} refused the credentials (HTTP {status}: {detail}); {fix}",
                        status=status, fatal=True)
    if status == 404:
        return LLMError("model_not_found", f"model '{model}' not found at {url} (HTTP 404: {detail}); pass --model "
                        "with a model the server serves and check the URL ends with /v1", status=status, fatal=True)
    if status == 413 or (status == 400 and is_context_overflow(detail)):
        # Not fatal: the caller can shrink the prompt and try again.
        err = LLMError("context_overflow", f"prompt too long for model '{model}' at {url} (HTTP {status}: "
                       f"{detail}); shorten the prompt or raise the server's context length", status=status)
        err.prompt_tokens, err.context_tokens = _overflow_sizes(body)
        return err
    return LLMError("bad_request", f"{url} rejected the request (HTTP {status}: {detail}); "
                    "check the model name, URL and request settings", status=status, fatal=True)


def _overflow_sizes(body: str) -> tuple[int | None, int | None]:
    """(prompt tokens, context tokens) from llama.cpp's exceed_context_size_error body."""
    try:
        err = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None, None
    if not isinstance(err, dict):
        return None, None
    sizes = [err.get("n_prompt_tokens"), err.get("n_ctx")]
    return tuple(v if isinstance(v, int) and v > 0 else None for v in sizes)  # type: ignore[return-value]


def transport_error(exc: httpx.RequestError, url: str) -> LLMError:
    """Map an httpx failure; connection failures and timeouts are retried, bad URLs are not."""
    reason = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, httpx.DecodingError):
        # A compressed body cut short: as transient as a cut JSON body.
        return bad_response(url, f"undecodable body ({reason})", retryable=True)
    if isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return LLMError("timeout", f"no response from {url} in time ({type(exc).__name__}); raise "
                        "read_timeout_s or lower max_concurrency", retryable=True)
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return LLMError("server", f"{url} dropped the connection ({reason})", retryable=True)
    retryable = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
    return LLMError("connect", f"cannot reach {url} ({reason}); start the server or fix --llm-url",
                    retryable=retryable, fatal=not retryable)
