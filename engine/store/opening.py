"""Opening a database file: path checks, connection pragmas, identity and schema checks, migrations.

Every refusal is a StoreError whose message names the path and what to do about it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import aiosqlite

from .errors import DamagedDatabase, StoreError
from .schema import APPLICATION_ID, SCHEMA_VERSION, pending_migrations

BUSY_TIMEOUT_MS = 5000


_FIX = "pass another --db"


def check_path(path: Path, *, create: bool, readonly: bool) -> None:
    """Refuse before SQLite gets a chance to create stray files or fail with a vague message."""
    if path.is_dir():
        raise StoreError(f"{path} is a directory; pass a database file path to --db")
    parent = path.parent
    if not path.exists():
        if readonly or not create:
            raise StoreError(f"no database at {path}; check --db or run `evotui runs`")
        if not parent.exists():
            raise StoreError(f"cannot create {path}: directory {parent} does not exist; "
                             f"create it (mkdir -p {parent}) or {_FIX}")
        if not parent.is_dir():
            raise StoreError(f"cannot create {path}: {parent} is not a directory; {_FIX}")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(f"cannot create {path}: directory {parent} is not writable; "
                             f"fix its permissions or {_FIX}")
        return
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read {path}: permission denied; fix its permissions or {_FIX}")
    if readonly:
        return
    if not os.access(path, os.W_OK):
        raise StoreError(f"{path} is not writable; fix its permissions or {_FIX}")
    if not os.access(parent, os.W_OK | os.X_OK):
        # WAL mode keeps <name>-wal and <name>-shm next to the database file.
        raise StoreError(f"directory {parent} is not writable (SQLite needs it for {path.name}-wal); "
                         f"fix its permissions or {_FIX}")


async def connect(path: Path, *, create: bool, readonly: bool) -> aiosqlite.Connection:
    """An open, checked, migrated connection in autocommit mode (transactions are explicit)."""
    check_path(path, create=create, readonly=readonly)
    try:
        if readonly:
            # mode=ro never creates the database file.
            conn = await aiosqlite.connect(path.resolve().as_uri() + "?mode=ro", uri=True,
                                           isolation_level=None)
        else:
            conn = await aiosqlite.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} ({exc}); check the path and its permissions "
                         f"or {_FIX}") from exc
    try:
        conn.row_factory = sqlite3.Row
        await _prepare(conn, path, create=create, readonly=readonly)
    except BaseException:
        await conn.close()
        raise
    return conn


@contextlib.asynccontextmanager
async def immediate(conn: aiosqlite.Connection):
    """One write transaction on an autocommit connection: committed if the block ends, rolled
    back if it raises (whatever it raises)."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        await conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            await conn.execute("ROLLBACK")
        raise


async def _pragma(conn: aiosqlite.Connection, name: str) -> int:
    rows = list(await conn.execute_fetchall(f"PRAGMA {name}"))
    return int(rows[0][0])


async def _prepare(conn: aiosqlite.Connection, path: Path, *, create: bool, readonly: bool) -> None:
    await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    try:
        # The first read of the header is where a non-SQLite file shows up.
        version = await _pragma(conn, "user_version")
        app_id = await _pragma(conn, "application_id")
        tables = list(await conn.execute_fetchall("SELECT name FROM sqlite_master WHERE type = 'table'"))
    except sqlite3.OperationalError as exc:
        raise StoreError(f"cannot read {path} ({exc}); check that no other program holds it "
                         f"or {_FIX}") from exc
    except sqlite3.DatabaseError as exc:
        if has_sqlite_header(path):  # an SQLite file whose first page is damaged, not a foreign file
            raise DamagedDatabase(path, str(exc)) from exc
        raise StoreError(f"{path} is not an evotui database ({exc}); {_FIX}") from exc

    if app_id != APPLICATION_ID:
        if app_id != 0 or version != 0 or tables:
            raise StoreError(f"{path} is not an evotui database (an SQLite file of another program); "
                             f"{_FIX}")
        if readonly or not create:
            raise StoreError(f"{path} is not an evotui database (empty database); {_FIX}")
    await _check_pages(conn, path)
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} was written by a newer evotui (schema v{version}, this one knows "
                         f"v{SCHEMA_VERSION}); upgrade evotui")

    if readonly:
        if version < SCHEMA_VERSION:
            raise StoreError(f"{path} has schema v{version} and this evotui reads v{SCHEMA_VERSION}; "
                             "open it once for writing (e.g. resume a run) to upgrade it")
        await conn.execute("PRAGMA query_only = ON")
        return

    try:
        mode = (await conn.execute_fetchall("PRAGMA journal_mode = WAL"))[0][0]  # type: ignore[index]
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot set up {path} ({exc}); {_FIX}") from exc
    if str(mode).lower() != "wal":
        raise StoreError(f"{path}: SQLite refused WAL mode (journal_mode is {mode}); put the database "
                         f"on a local filesystem or {_FIX}")
    if version < SCHEMA_VERSION:
        await _migrate(conn, path)


SQLITE_MAGIC = b"SQLite format 3\x00"


def has_sqlite_header(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


async def _check_pages(conn: aiosqlite.Connection, path: Path) -> None:
    """PRAGMA quick_check before anything reads rows or writes: a damaged file is refused at the
    door instead of failing halfway through a resume or taking a new run into broken pages. It
    reads every page once (no index cross-checks): 8-20 ms for a 200-proposal run's 6 MB."""
    try:
        rows = await conn.execute_fetchall("PRAGMA quick_check(1)")
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise StoreError(f"cannot read {path} ({exc}); check that no other program holds it or {_FIX}") from exc
        raise DamagedDatabase(path, str(exc)) from exc
    verdict = [str(r[0]) for r in rows]
    if verdict != ["ok"]:
        raise DamagedDatabase(path, first_problem(verdict))


def first_problem(verdict: list[str]) -> str:
    """The first line of an integrity report that says something (not the '*** in database' header)."""
    lines = [ln.strip() for text in verdict for ln in text.splitlines()]
    return next((ln for ln in lines if ln and not ln.startswith("***")), "quick_check failed")


async def _migrate(conn: aiosqlite.Connection, path: Path) -> None:
    """Apply every pending step and the new version number in one transaction: all or nothing."""
    try:
        async with immediate(conn):
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = await _pragma(conn, "user_version")
            for step in pending_migrations(current):
                for statement in step:
                    await conn.execute(statement)
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot upgrade {path} to schema v{SCHEMA_VERSION} ({exc}); "
                         f"the file is unchanged; {_FIX}") from exc
