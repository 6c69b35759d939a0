"""The exception types the store raises; messages are one line naming the problem and the fix."""

from __future__ import annotations

import json
import sqlite3


class StoreError(Exception):
    """A database problem the user or the engine must act on (bad path, newer schema, failed write)."""


class DamagedDatabase(StoreError):
    """The file's pages are inconsistent (a bad sector, a copy cut short, a foreign write): it is
    neither read on nor written to; `evotui recover` salvages what is intact into a new file."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path} is damaged ({problem}); evotui writes nothing to it: salvage what is intact "
                         f"with `evotui recover {path} NEW.db` and use NEW.db")


def is_damage(exc: BaseException) -> bool:
    """Whether a read failed because of what the file holds (corrupt pages, broken JSON or text in
    a row), not because of a lock, a busy file or a bug in the query."""
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return True
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "malformed" in text or "could not decode" in text
    # Plain DatabaseError is SQLITE_CORRUPT / SQLITE_NOTADB; its subclasses are other failures.
    return type(exc) is sqlite3.DatabaseError
