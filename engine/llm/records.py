"""What one chat call reports (CallRecord, to the on_call hook and the store) and returns
(ChatResult). Kept apart from the client so readers of stored calls need no HTTP machinery."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallRecord:
    endpoint: str
    url: str
    model: str
    stage: str
    status: str  # "ok" | "length" | "error"
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    ttft_s: float | None
    retries: int
    error: str | None
    started_at: float
    messages: list[dict] | None = None
    """The request's messages as last sent (after a shrink, the shorter ones); not a copy, so
    on_call must not change them."""
    response: str | None = None
    """The response text; None for an error or cancelled call."""
    cached_tokens: int = 0
    """Prompt tokens the server served from its prompt cache (OpenAI's
    usage.prompt_tokens_details.cached_tokens); priced at the model's cached rate."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    retries: int
    shrunk: bool = False
    """The prompt overflowed the server's context and was shrunk by the caller's rule."""
