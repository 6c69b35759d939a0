"""A database as an earlier release left it: the migrations up to `version`, that user_version and
evotui's application id, so `Store.open` upgrades it in place (the schema upgrade tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.store.schema import MIGRATIONS


def database_at(path: Path, version: int, rows: tuple[str, ...] = ()) -> Path:
    """Create `path` at schema `version`, then run `rows` (INSERTs written by that release)."""
    con = sqlite3.connect(path)
    for step in MIGRATIONS[:version]:
        for sql in step:
            con.execute(sql)
    for sql in rows:
        con.execute(sql)
    con.execute(f"PRAGMA user_version = {version}")
    con.execute(f"PRAGMA application_id = {int.from_bytes(b'evot', 'big')}")
    con.commit()
    con.close()
    return path
