"""Prefix caching of the simulated vllm profile, modelled on vLLM's automatic prefix caching.

A prompt is cut into fixed blocks of BLOCK_TOKENS tokens (BLOCK_CHARS characters of the chat
text, at the simulator's 4 characters per token); each full block is named by a hash of the
whole text up to and including it, so a block matches only when everything before it matches
too. A request's cached prefix is its leading run of blocks already in the cache; only the rest
is prefilled. A partial last block is never cached (vLLM caches full blocks only), and at least
one prompt token is always computed (a fully cached prompt still needs its last token's logits).

The cache holds a bounded number of blocks, evicted least recently used. Within one prompt the
tail is evicted before the head (vLLM frees a finished request's blocks in reverse order for
that reason): a shared system prompt outlives the different examples that followed it.

llama.cpp's `cache_prompt` differs: each slot keeps its own last prompt and a request reuses
the longest common prefix, token by token, of the slot it is given (picked by similarity). Block
matching over one shared pool is its approximation: the same reuse for a prompt that repeats a
recent one, at 16-token granularity, and without the limit of one remembered prompt per slot.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from engine.llm.sim.plugins import message_text

BLOCK_TOKENS = 16
"""vLLM's default block size."""
CHARS_PER_TOKEN = 4
"""The simulator's token count is characters / 4 (app.py)."""
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


def chat_text(messages: Iterable[dict]) -> str:
    """The prompt as a chat template lays it out: each message's role, then its content, so a
    system message and a user message with the same words are different prefixes."""
    return "".join(f"<|{m.get('role', '')}|>\n{message_text(m.get('content'))}\n" for m in messages)


def block_hashes(text: str) -> tuple[bytes, ...]:
    """One hash per full block; block i's hash covers the text of blocks 0..i."""
    h = hashlib.blake2b(digest_size=16)
    out = []
    for end in range(BLOCK_CHARS, len(text) + 1, BLOCK_CHARS):
        h.update(text[end - BLOCK_CHARS:end].encode("utf-8", "surrogatepass"))
        out.append(h.copy().digest())
    return tuple(out)


def prompt_blocks(messages: Iterable[dict]) -> tuple[bytes, ...]:
    return block_hashes(chat_text(messages))


class PrefixCache:
    """LRU set of block hashes. capacity_blocks None: unbounded."""

    def __init__(self, capacity_blocks: int | None) -> None:
        if capacity_blocks is not None and capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be at least 1, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, blocks: Sequence[bytes]) -> int:
        """How many leading blocks are cached; those count as just used."""
        n = 0
        while n < len(blocks) and blocks[n] in self._blocks:
            n += 1
        self._touch(blocks[:n])
        return n

    def cached_tokens(self, blocks: Sequence[bytes], prompt_tokens: float) -> int:
        """Prompt tokens a request need not prefill: its cached leading blocks, leaving at least
        one token to compute."""
        usable = max(0, min(len(blocks), int((prompt_tokens - 1) // BLOCK_TOKENS)))
        return self.match(blocks[:usable]) * BLOCK_TOKENS

    def insert(self, blocks: Sequence[bytes]) -> None:
        """A prefilled prompt's blocks enter the cache (or are refreshed), then the least
        recently used beyond the capacity leave it."""
        self._touch(blocks)
        while self.capacity_blocks is not None and len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
            self.evicted += 1

    def _touch(self, blocks: Sequence[bytes]) -> None:
        # Tail first, head last: the head ends up most recent, so eviction takes tails first.
        for block in reversed(blocks):
            self._blocks[block] = None
            self._blocks.move_to_end(block)
