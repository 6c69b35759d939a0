"""Texts in an export: short ones inline, long ones as content-addressed blobs.

A text field holds either the string itself or {"blob": SHA256_HEX, "size": BYTES}; the blob is
the file blobs/SHA256_HEX with the text's exact UTF-8 bytes, so equal texts (a system prompt
every request shares, a program both proposed and accepted) are written once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from engine.trace.errors import TraceError

INLINE_MAX = 512  # bytes; a longer text goes to a blob


class BlobWriter:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.written: set[str] = set()

    def ref(self, text: str | None) -> Any:
        if text is None:
            return None
        raw = text.encode("utf-8")
        if len(raw) <= INLINE_MAX:
            return text
        digest = hashlib.sha256(raw).hexdigest()
        if digest not in self.written:
            self.folder.mkdir(exist_ok=True)
            (self.folder / digest).write_bytes(raw)
            self.written.add(digest)
        return {"blob": digest, "size": len(raw)}


class BlobReader:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def text(self, value: Any, where: str) -> str | None:
        """where names the file and line for error messages."""
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, dict) or not isinstance(value.get("blob"), str):
            raise TraceError(f"{where}: a text must be a string or {{\"blob\": sha256, \"size\": n}}")
        digest = value["blob"]
        path = self.folder / digest
        if not path.is_file():
            raise TraceError(f"{where}: blob {digest} is missing from {self.folder}")
        raw = path.read_bytes()
        if hashlib.sha256(raw).hexdigest() != digest:
            raise TraceError(f"{path}: content does not match its sha256 name (corrupt blob)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceError(f"{path}: not UTF-8 text ({exc})") from None
