"""The simulator's prefix cache (engine/llm/sim/prefix_cache.py): block matching, LRU eviction
tail first, and a shared system prompt reused across different user messages."""

from __future__ import annotations

import pytest

from engine.llm.sim.prefix_cache import (BLOCK_CHARS, BLOCK_TOKENS, PrefixCache, block_hashes, chat_text,
                                         prompt_blocks)


def test_only_full_blocks_are_hashed_and_each_covers_everything_before_it():
    assert block_hashes("x" * (BLOCK_CHARS - 1)) == ()
    assert len(block_hashes("x" * (3 * BLOCK_CHARS + 5))) == 3
    a = block_hashes("a" * BLOCK_CHARS + "b" * BLOCK_CHARS)
    b = block_hashes("c" * BLOCK_CHARS + "b" * BLOCK_CHARS)
    # the same second block after a different first one is a different block
    assert a[1] != b[1]
    assert block_hashes("a" * BLOCK_CHARS + "z" * BLOCK_CHARS)[0] == a[0]


def test_roles_are_part_of_the_prefix():
    words = "w" * (2 * BLOCK_CHARS)
    assert prompt_blocks([{"role": "system", "content": words}]) != prompt_blocks([{"role": "user", "content": words}])


def test_match_counts_the_leading_run_only():
    cache = PrefixCache(None)
    blocks = block_hashes("".join(chr(65 + i) * BLOCK_CHARS for i in range(4)))
    cache.insert(blocks[:2])
    assert cache.match(blocks) == 2
    assert cache.match(blocks[:1] + blocks[2:]) == 1  # the run stops at the first block missing
    # the same text without its first block: every hash differs, nothing matches
    assert cache.match(block_hashes("".join(chr(65 + i) * BLOCK_CHARS for i in range(1, 4)))) == 0
    assert cache.match(()) == 0


def test_a_shared_system_prompt_hits_its_blocks_and_not_the_user_messages():
    system = {"role": "system", "content": "You sort items by hidden rules. " * 60}
    first = [system, {"role": "user", "content": "Category: fruit\nItems: apple, pear, plum " * 8}]
    second = [system, {"role": "user", "content": "Category: tools\nItems: saw, drill, plane " * 8}]
    cache = PrefixCache(None)
    cache.insert(prompt_blocks(first))
    # The texts agree up to the user's first content character: the system part and "<|user|>\n".
    shared = (len(chat_text([system])) + len("<|user|>\n")) // BLOCK_CHARS
    assert 0 < shared < len(prompt_blocks(second))
    assert cache.match(prompt_blocks(second)) == shared
    assert cache.match(prompt_blocks(first)) == len(prompt_blocks(first))


def test_lru_eviction_takes_tails_first_so_a_shared_head_survives():
    a = block_hashes("a" * 3 * BLOCK_CHARS)
    b = block_hashes("b" * 3 * BLOCK_CHARS)
    cache = PrefixCache(4)
    cache.insert(a)
    cache.insert(b)
    assert len(cache) == 4 and cache.evicted == 2
    assert cache.match(a) == 1  # a's two tail blocks went, its head stayed
    assert cache.match(b) == 3
    # matching counts as use: a's head is now newer than b's blocks, so b's tail goes next
    cache.match(a)
    cache.insert(block_hashes("c" * BLOCK_CHARS))
    assert cache.match(a) == 1 and cache.match(b) == 2


def test_at_least_one_prompt_token_is_computed():
    blocks = block_hashes("q" * 2 * BLOCK_CHARS)
    cache = PrefixCache(None)
    cache.insert(blocks)
    # a 32-token prompt that is entirely cached still computes its last block
    assert cache.cached_tokens(blocks, 2 * BLOCK_TOKENS) == BLOCK_TOKENS
    assert cache.cached_tokens(blocks, 2 * BLOCK_TOKENS + 1) == 2 * BLOCK_TOKENS
    assert cache.cached_tokens(blocks, 1) == 0


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity_blocks"):
        PrefixCache(0)
