"""The run database as the EvoTrace commands open it (evotui/commands/trace*.py): a missing file
is the user's mistake, named with the flag that fixes it, not an empty new database."""

from __future__ import annotations

from pathlib import Path

from engine.store.store import Store
from engine.trace.errors import TraceError


async def open_db(db: Path, *, readonly: bool, create: bool = False) -> Store:
    if not create and not db.exists():
        raise TraceError(f"no database at {db}; pass --db PATH")
    return await Store.open(db, create=create, readonly=readonly)
