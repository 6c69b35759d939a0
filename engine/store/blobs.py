"""Texts of LLM requests and responses as content-addressed, compressed, deduplicated blobs.

A blob is the canonical bytes of one request message (JSON, sorted keys) or of one response text
(UTF-8), stored once in the `blobs` table under the sha256 of those bytes, zlib-compressed. The
writer compresses (the SQL function below runs on its thread, off the event loop) and only when
the hash is new. Messages, not whole requests, are the unit: a run's requests repeat the same
system prompt with many user messages, and per message stored ~7x fewer bytes than per request
on the `rules` task (60 proposals, 1,790 calls: 68 kB against 485 kB compressed).

zlib, not zstd: it is in the standard library, and on these blobs (median a few hundred bytes)
zstd -3 came out the same size (165 kB against zlib -6's 163 kB for that run's 990 blobs).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .codec import _json_default
from .errors import StoreError

LEVEL = 6
DEFLATE_SQL_FUNCTION = "evotui_deflate"

# The compressed bytes are computed only for a hash not yet stored (an index lookup otherwise);
# OR IGNORE covers the same hash inserted twice in one statement group.
INSERT_SQL = (f"INSERT OR IGNORE INTO blobs (hash, size, data) SELECT ?1, ?2, {DEFLATE_SQL_FUNCTION}(?3) "
              "WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE hash = ?1)")
ID_OF = "(SELECT id FROM blobs WHERE hash = ?)"

# Blobs no llm_calls row names any more (after a run is deleted).
ORPHANS_SQL = """DELETE FROM blobs WHERE id NOT IN (
    SELECT response_blob FROM llm_calls WHERE response_blob IS NOT NULL
    UNION SELECT j.value FROM llm_calls, json_each(llm_calls.request_blobs_json) AS j
    WHERE llm_calls.request_blobs_json IS NOT NULL AND j.value IS NOT NULL)"""


def message_bytes(message: Mapping[str, Any]) -> bytes:
    """Canonical bytes of a chat message: equal messages give equal bytes (sorted keys, no spaces).
    surrogatepass: a lone surrogate (legal in JSON text a server sent) round-trips unchanged."""
    try:
        text = json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"llm call message cannot be stored as JSON ({exc})") from exc
    return text.encode("utf-8", "surrogatepass")


def text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def digest(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()


def compress(raw: bytes) -> bytes:
    return zlib.compress(raw, LEVEL)


def decompress(data: bytes, *, blob_id: int | None = None) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error as exc:
        raise StoreError(f"blob {blob_id} is corrupt ({exc}); run `PRAGMA integrity_check` on the "
                         "database") from exc


def decode_message(raw: bytes) -> dict[str, Any]:
    return json.loads(raw.decode("utf-8", "surrogatepass"))


def decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def register(conn: sqlite3.Connection) -> None:
    """Give a writing connection the compression function INSERT_SQL calls."""
    conn.create_function(DEFLATE_SQL_FUNCTION, 1, _deflate, deterministic=True)


def _deflate(raw: bytes | str) -> bytes:
    return compress(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass"))


@functools.lru_cache(maxsize=64)
def call_insert_sql(columns: tuple[str, ...], n_messages: int | None) -> str:
    """The llm_calls insert: `columns` as parameters, then the text references, which resolve the
    blobs' ids by hash (the blob inserts come first in the same batch): the JSON list of the
    messages' blob ids (NULL when no text is kept) and the response's (a NULL hash gives NULL)."""
    request = "NULL" if n_messages is None else f"json_array({', '.join([ID_OF] * n_messages)})"
    return (f"INSERT INTO llm_calls ({', '.join(columns)}, request_blobs_json, response_blob) "
            f"VALUES ({', '.join('?' * len(columns))}, {request}, {ID_OF})")


def keeps_text(config: Any) -> bool:
    """[store] keep_llm_text of a run's config (default true, also for configs before it)."""
    store = config.get("store") if isinstance(config, dict) else None
    return not isinstance(store, dict) or store.get("keep_llm_text", True) is not False


class RecentHashes:
    """A bounded LRU of hashes enqueued lately, so a text seen again (the same system prompt on
    every call) costs no insert op. Bounded: a miss only costs a redundant INSERT OR IGNORE."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._capacity = capacity
        self._hashes: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._hashes)

    def add(self, h: bytes) -> bool:
        """Note h as written; True if it was already there (the caller skips the insert)."""
        if h in self._hashes:
            self._hashes.move_to_end(h)
            return True
        self._hashes[h] = None
        if len(self._hashes) > self._capacity:
            self._hashes.popitem(last=False)
        return False

    def clear(self) -> None:
        self._hashes.clear()


PutBlob = Callable[[bytes, int, bytes], None]
"""Enqueues one blob insert: (hash, size, raw bytes), the parameters of INSERT_SQL."""


class TextKeeper:
    """A store's side of recording texts: which runs keep them, and which hashes were enqueued
    lately (so a repeated text costs no op)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.recent = RecentHashes(capacity)
        self._keep: dict[str, bool] = {}  # run_id -> [store] keep_llm_text; absent = true

    def set_keep(self, run_id: str, keep: bool) -> None:
        self._keep[run_id] = keep

    def forget(self, run_id: str) -> None:
        """After a run's deletion: its orphan blobs go, so no hash noted as written can be trusted."""
        self._keep.pop(run_id, None)
        self.recent.clear()

    def refs(self, run_id: str, rec: Any, put: PutBlob) -> tuple[int | None, list[bytes | None]]:
        """(message count, None when no text is kept; the messages' hashes then the response's or
        None), enqueuing through `put` the texts not enqueued lately. Every text is converted
        before anything is enqueued, so a bad one fails whole, at the caller's line."""
        if not self._keep.get(run_id, True):
            return None, [None]
        messages, response = getattr(rec, "messages", None), getattr(rec, "response", None)
        raws: list[bytes | None] = [message_bytes(m) for m in messages] if messages is not None else []
        raws.append(None if response is None else text_bytes(response))
        refs: list[bytes | None] = []
        for raw in raws:
            if raw is None:
                refs.append(None)
                continue
            h = digest(raw)
            if not self.recent.add(h):
                put(h, len(raw), raw)
            refs.append(h)
        return (None if messages is None else len(messages)), refs


def ids_in(rows: Iterable[Any]) -> set[int]:
    """Blob ids named by call rows (request_blobs_json, response_blob); NULLs skipped."""
    out: set[int] = set()
    for row in rows:
        request, response = row["request_blobs_json"], row["response_blob"]
        if request is not None:
            out.update(i for i in json.loads(request) if isinstance(i, int))
        if response is not None:
            out.add(int(response))
    return out
