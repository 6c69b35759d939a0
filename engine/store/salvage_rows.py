"""Reading every row of a table that is still readable, in rowid order, stepping over damage.

A damaged leaf page fails every query whose b-tree seek lands on it, and only those: a seek to a
rowid past the page's range lands on the next, intact page. So the walk reads in batches; when a
batch fails it goes row by row, and when even the next rowid cannot be found it probes forward
(doubling the step, then halving back) for the first rowid whose seek works again, and records
the rowids it stepped over. Every evotui table has a rowid (none is WITHOUT ROWID).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field

MIN_ROWID, MAX_ROWID = -(2 ** 63), 2 ** 63 - 1
BATCH = 500


@dataclass
class WalkDamage:
    """What the walk could not read."""

    unreadable_rows: int = 0
    """Rows whose rowid was found but whose content could not be read (or decoded)."""
    skipped: list[tuple[int, int]] = field(default_factory=list)
    """Rowid ranges (first, last) stepped over because their page could not be read; how many
    rows they held is unknown (the table's count, where readable, says)."""
    unreadable_table: str = ""
    """Why no row could be read at all ('' when some could)."""


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def walk_rows(conn: sqlite3.Connection, table: str, columns: list[str], damage: WalkDamage) -> Iterator[tuple]:
    """(rowid, *columns) of every readable row of `table`, in rowid order."""
    select = f"SELECT rowid, {', '.join(quoted(c) for c in columns)} FROM {quoted(table)}"
    after = MIN_ROWID
    single_steps = 0  # after a failed batch, this many rows are read one at a time
    while True:
        if single_steps == 0:
            try:
                rows = conn.execute(f"{select} WHERE rowid > ? ORDER BY rowid LIMIT {BATCH}", (after,)).fetchall()
            except sqlite3.DatabaseError:
                single_steps = BATCH
                continue
            if rows and not _plausible(conn, table, rows, after):
                single_steps = BATCH  # garbage in the batch: go row by row, each row checked
                continue
            yield from rows
            if rows:
                after = rows[-1][0]
            if len(rows) == BATCH:
                continue
            if not _more_after(conn, table, after):
                return
            single_steps = BATCH  # a damaged page can end a scan early without an error
            continue
        single_steps -= 1
        found, nxt = _next_rowid(conn, table, after)
        if found and nxt is None and not _more_after(conn, table, after):
            return
        if not found or nxt is None:
            resume_at = _first_readable_seek(conn, table, after)
            if resume_at is None:
                if after == MIN_ROWID:
                    damage.unreadable_table = "no row of it could be read"
                else:
                    damage.skipped.append((after + 1, MAX_ROWID))
                return
            damage.skipped.append((after + 1, resume_at))
            after = resume_at
            continue
        try:
            row = conn.execute(f"{select} WHERE rowid = ?", (nxt,)).fetchone()
        except sqlite3.DatabaseError:
            damage.unreadable_rows += 1
        else:
            if row is not None:
                yield row
        after = nxt


def _more_after(conn: sqlite3.Connection, table: str, after: int) -> bool:
    """Whether the table has rows past `after` (its largest rowid, read down the right edge of the
    b-tree, says; if even that cannot be read, assume so and let the probe find out)."""
    try:
        (largest,) = conn.execute(f"SELECT max(rowid) FROM {quoted(table)}").fetchone()
    except sqlite3.DatabaseError:
        return True
    return largest is not None and int(largest) > after


def _plausible(conn: sqlite3.Connection, table: str, rows: list[tuple], after: int) -> bool:
    """A batch as an intact b-tree returns it: rowids ascending from `after`, and its last row
    found again by a direct lookup (a damaged page can yield rowids that are not in the table)."""
    last = after
    for row in rows:
        if row[0] <= last:
            return False
        last = row[0]
    return _exists(conn, table, last)


def _exists(conn: sqlite3.Connection, table: str, rowid: int) -> bool:
    try:
        return conn.execute(f"SELECT 1 FROM {quoted(table)} WHERE rowid = ?", (rowid,)).fetchone() is not None
    except sqlite3.DatabaseError:
        return False


def _next_rowid(conn: sqlite3.Connection, table: str, after: int) -> tuple[bool, int | None]:
    """(True, the first rowid after `after` or None at the end), or (False, None) if the seek
    fails or lands on garbage (a rowid not after `after`, or one a direct lookup cannot find).
    Every step of the walk moves forward."""
    try:
        row = conn.execute(f"SELECT rowid FROM {quoted(table)} WHERE rowid > ? ORDER BY rowid LIMIT 1",
                           (after,)).fetchone()
    except sqlite3.DatabaseError:
        return False, None
    if row is None:
        return True, None
    rowid = int(row[0])
    if rowid <= after or not _exists(conn, table, rowid):  # garbage from a damaged page
        return False, None
    return True, rowid


def _finds_row(conn: sqlite3.Connection, table: str, probe: int) -> bool:
    return _next_rowid(conn, table, probe)[1] is not None


def _first_readable_seek(conn: sqlite3.Connection, table: str, after: int) -> int | None:
    """The smallest p > after whose seek (rowid > p) finds a row, or None if none up to MAX_ROWID
    does (the damage reaches the end of the table)."""
    failed, step = after, 1
    while True:
        probe = min(after + step, MAX_ROWID)
        if _finds_row(conn, table, probe):
            break
        failed = probe
        if probe == MAX_ROWID:
            return None
        step *= 2
    works = probe
    while works - failed > 1:  # the boundary lies in (failed, works]
        mid = (failed + works) // 2
        if _finds_row(conn, table, mid):
            works = mid
        else:
            failed = mid
    return works


def readable_count(conn: sqlite3.Connection, table: str) -> int | None:
    """How many rows the table held, by whichever of its b-trees can still be counted: the table's
    own or one of its indexes (an intact index still knows how many rows the table had). The
    largest count wins: a damaged b-tree can only undercount. None if none can be counted."""
    try:
        indexes = [str(r[1]) for r in conn.execute(f"PRAGMA index_list({quoted(table)})").fetchall()]
    except sqlite3.DatabaseError:
        indexes = []
    counts = []
    for how in ["NOT INDEXED", *(f"INDEXED BY {quoted(i)}" for i in indexes if not i.startswith("sqlite_autoindex"))]:
        try:
            counts.append(int(conn.execute(f"SELECT count(*) FROM {quoted(table)} {how}").fetchone()[0]))
        except sqlite3.DatabaseError:
            continue
    # Automatic indexes (primary keys, UNIQUE) cannot be named in INDEXED BY; a plain count may use one.
    try:
        counts.append(int(conn.execute(f"SELECT count(*) FROM {quoted(table)}").fetchone()[0]))
    except sqlite3.DatabaseError:
        pass
    return max(counts) if counts else None
