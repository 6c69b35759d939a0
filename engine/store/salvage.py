"""`evotui recover`: copy what is still readable of a damaged database into a new one.

The new file gets this release's schema (older databases come out upgraded: migrations only add
tables and columns, so the columns both have are copied); rows keep their rowids, so their write
order, which the readers rely on, survives. The damaged file is only read. Rows are read table by
table, stepping over damaged pages (salvage_rows.py). Rows whose run was lost are dropped (they
could belong to no run), driver leases are not copied (no process drives the new file), and the
report says per table how many rows were kept and how many were lost.

SQLite's own `.recover` (the sqlite3 shell) is not used: it needs the sqlite_dbpage table, which
common builds (Debian's among them) leave out, so it could not be counted on.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StoreError
from .opening import SQLITE_MAGIC, first_problem
from .salvage_rows import WalkDamage, quoted, readable_count, walk_rows
from .schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

NOT_COPIED = {"leases": "driver leases belong to the old file"}
_HEADER = 100  # bytes of the SQLite file header; user_version at 60, application_id at 68


@dataclass
class TableSalvage:
    table: str
    kept: int = 0
    expected: int | None = None
    """Rows the damaged file held, where any of the table's b-trees could still count them."""
    refused: int = 0
    """Rows read but refused by the schema (a NOT NULL or CHECK their damaged content breaks)."""
    orphaned: int = 0
    """Rows dropped because the run they belong to was lost."""
    damage: WalkDamage = field(default_factory=WalkDamage)
    note: str = ""

    @property
    def lost(self) -> int | None:
        """Rows of the damaged file not in the new one; None when unknown (no count, pages skipped)."""
        known = self.damage.unreadable_rows + self.refused + self.orphaned
        if self.expected is not None:
            return max(self.expected - self.kept, known)
        return None if self.damage.skipped or self.damage.unreadable_table else known

    def as_dict(self) -> dict:
        return {"table": self.table, "kept": self.kept, "lost": self.lost, "expected": self.expected,
                "unreadable_rows": self.damage.unreadable_rows, "refused": self.refused,
                "orphaned": self.orphaned, "skipped_rowids": [list(r) for r in self.damage.skipped],
                "note": self.note or self.damage.unreadable_table}


@dataclass
class SalvageReport:
    source: Path
    out: Path
    problem: str
    """The damaged file's first quick_check complaint ('ok' if it had none)."""
    tables: list[TableSalvage]

    @property
    def kept(self) -> int:
        return sum(t.kept for t in self.tables)

    @property
    def complete(self) -> bool:
        """Every row of the source is in the new file."""
        return all(t.lost == 0 for t in self.tables if t.table not in NOT_COPIED)

    def as_dict(self) -> dict:
        return {"source": str(self.source), "out": str(self.out), "problem": self.problem,
                "complete": self.complete, "tables": [t.as_dict() for t in self.tables]}


def salvage(source: Path, out: Path) -> SalvageReport:
    """Copy the readable rows of `source` into the new file `out`; StoreError (one line) when
    either path is unusable. `out` appears only when the copy is complete and checked."""
    _check_paths(source, out)
    partial = out.with_name(out.name + ".partial")
    for leftover in (partial, Path(f"{partial}-journal")):
        leftover.unlink(missing_ok=True)  # an earlier recover stopped halfway: its file, not the user's
    src = _open_source(source)
    try:
        problem = _quick_check(src)
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            tables = _copy(src, dst)
            _seal(dst, partial)
        finally:
            dst.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        src.close()
    os.replace(partial, out)
    return SalvageReport(source, out, problem, tables)


def _check_paths(source: Path, out: Path) -> None:
    if not source.is_file():
        raise StoreError(f"no database at {source}; give the damaged database's path")
    try:
        with source.open("rb") as fh:
            header = fh.read(_HEADER)
    except OSError as exc:
        raise StoreError(f"cannot read {source} ({exc.strerror}); fix its permissions") from None
    if not header.startswith(SQLITE_MAGIC):
        raise StoreError(f"{source} is not an SQLite database (no SQLite header); there is nothing to recover")
    version = int.from_bytes(header[60:64], "big") if len(header) == _HEADER else 0
    app_id = int.from_bytes(header[68:72], "big") if len(header) == _HEADER else 0
    if app_id not in (0, APPLICATION_ID):
        raise StoreError(f"{source} is an SQLite file of another program, not an evotui database")
    if version > SCHEMA_VERSION:
        raise StoreError(f"{source} was written by a newer evotui (schema v{version}, this one knows "
                         f"v{SCHEMA_VERSION}); recover it with that evotui")
    if out.resolve() == source.resolve():
        raise StoreError("the recovered database must be a new file, not the damaged one")
    if out.exists() or Path(f"{out}-wal").exists():
        raise StoreError(f"{out} already exists; give a new file name for the recovered database")
    parent = out.parent
    if not parent.is_dir():
        raise StoreError(f"cannot create {out}: directory {parent} does not exist; create it (mkdir -p {parent})")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create {out}: directory {parent} is not writable; pick another place")


def _open_source(source: Path) -> sqlite3.Connection:
    """Read-only; immutable (no -shm needed, the WAL ignored) only if a plain read-only open fails."""
    uri = source.resolve().as_uri()
    error: Exception | None = None
    for suffix in ("?mode=ro", "?mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(uri + suffix, uri=True)
        except sqlite3.DatabaseError as exc:
            error = exc
            continue
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.DatabaseError as exc:
            conn.close()
            error = exc
    raise StoreError(f"cannot open {source} even read-only ({error}); its first page, which lists the "
                     "tables, is unreadable, so no table can be found")


def _quick_check(src: sqlite3.Connection) -> str:
    try:
        verdict = [str(r[0]) for r in src.execute("PRAGMA quick_check(1)").fetchall()]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return "ok" if verdict == ["ok"] else first_problem(verdict)


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({quoted(table)})").fetchall()]


def _copy(src: sqlite3.Connection, dst: sqlite3.Connection) -> list[TableSalvage]:
    dst.execute("PRAGMA foreign_keys = OFF")  # runs are copied first, orphans dropped after
    dst.execute("BEGIN")
    for step in MIGRATIONS:
        for statement in step:
            dst.execute(statement)
    names = [str(r[0]) for r in dst.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
    try:
        present = {str(r[0]) for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"the list of tables cannot be read ({exc}); nothing can be recovered") from None
    reports = []
    for name in names:
        report = TableSalvage(name)
        reports.append(report)
        if name in NOT_COPIED:
            report.note = f"not copied: {NOT_COPIED[name]}"
        elif name not in present:
            report.note = "not in the source (an older schema): created empty"
            report.expected = 0
        else:
            _copy_table(src, dst, report)
    _drop_orphans(dst, {r.table: r for r in reports})
    dst.execute("COMMIT")
    return reports


def _copy_table(src: sqlite3.Connection, dst: sqlite3.Connection, report: TableSalvage) -> None:
    table = report.table
    report.expected = readable_count(src, table)
    try:
        source_cols = set(_columns(src, table))
    except sqlite3.DatabaseError as exc:
        report.damage.unreadable_table = f"its columns cannot be read ({exc})"
        return
    columns = [c for c in _columns(dst, table) if c in source_cols]
    insert = (f"INSERT INTO {quoted(table)} (rowid, {', '.join(quoted(c) for c in columns)}) "
              f"VALUES ({', '.join('?' * (len(columns) + 1))})")
    for row in walk_rows(src, table, columns, report.damage):
        try:
            dst.execute(insert, row)
        except sqlite3.DatabaseError:
            report.refused += 1
        else:
            report.kept += 1


def _drop_orphans(dst: sqlite3.Connection, reports: dict[str, TableSalvage]) -> None:
    """Rows naming a run that was lost: no run can show or resume them."""
    for table, rowid, _parent, _fk in dst.execute("PRAGMA foreign_key_check").fetchall():
        dst.execute(f"DELETE FROM {quoted(table)} WHERE rowid = ?", (rowid,))
        reports[table].orphaned += 1
        reports[table].kept -= 1


def _seal(dst: sqlite3.Connection, path: Path) -> None:
    """Mark the file as an evotui database of this schema, only once it is whole and checks out."""
    problem = [str(r[0]) for r in dst.execute("PRAGMA integrity_check").fetchall()]
    if problem != ["ok"]:
        raise StoreError(f"the recovered copy {path} fails its own integrity check ({first_problem(problem)}); "
                         "this is a bug in evotui recover, please report it")
    dst.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    dst.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
