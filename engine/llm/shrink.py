"""Truncation rules for prompts that overflow the server's context (LLMClient.chat(shrink=...)).

middle_out cuts the middle of the longest message: the head (system text, task, current
instructions: the stable prefix that prefix caches reuse) and the tail (the closing request,
e.g. "write the improved instructions in a ``` block") survive, the bulk in between (example
traces) is what goes. The amount comes from the server's own numbers when it gives them
(llama.cpp: n_prompt_tokens and n_ctx), else half the message.
"""

from __future__ import annotations

from engine.llm.errors import LLMError

HEADROOM = 0.75
"""Fraction of the context the shrunk prompt aims at (room for the answer and tokenizer error)."""
MIN_KEEP = 200
"""Characters of a message that are always kept."""
HEAD_SHARE = 0.6
"""Share of the kept characters taken from the start of the message (the rest from its end)."""


def keep_ratio(err: LLMError) -> float:
    if err.prompt_tokens and err.context_tokens and err.prompt_tokens > 0:
        return max(0.05, min(0.9, HEADROOM * err.context_tokens / err.prompt_tokens))
    return 0.5


def middle_out(messages: list[dict], err: LLMError) -> list[dict] | None:
    """A copy of messages whose longest text message keeps only its head and tail; None if
    there is nothing left to cut."""
    texts = [(i, m["content"]) for i, m in enumerate(messages) if isinstance(m.get("content"), str)]
    if not texts:
        return None
    total = sum(len(t) for _, t in texts)
    index, longest = max(texts, key=lambda it: len(it[1]))
    excess = int(total * (1.0 - keep_ratio(err)))
    keep = max(MIN_KEEP, len(longest) - excess)
    if keep >= len(longest):
        return None
    head = int(keep * HEAD_SHARE)
    tail = keep - head
    cut = len(longest) - keep
    text = (longest[:head] + f"\n[... {cut} characters cut to fit the model's context ...]\n"
            + (longest[-tail:] if tail else ""))
    out = [dict(m) for m in messages]
    out[index]["content"] = text
    return out
