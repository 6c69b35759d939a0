"""Damaging a real evotui database the way a bad sector does: garbage over part of one page.

Pages are found by walking the table's b-tree from its root page (no dbstat needed, which not
every SQLite build has): the victim is a leaf in the middle of the table, so rows before and after
it survive and a salvage has something to save and something to lose.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

LEAF_TABLE, INTERIOR_TABLE = 0x0D, 0x05


def _page(data: bytes, size: int, number: int) -> bytes:
    return data[(number - 1) * size:number * size]


def _header_offset(number: int) -> int:
    return 100 if number == 1 else 0  # page 1 starts with the 100-byte file header


def leaf_pages(db: Path, table: str) -> list[int]:
    """The table's leaf pages in key order (a table of one page: that page)."""
    con = sqlite3.connect(db)
    try:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?",
                              (table,)).fetchone()
    finally:
        con.close()
    data = db.read_bytes()
    leaves: list[int] = []

    def walk(number: int) -> None:
        page = _page(data, size, number)
        at = _header_offset(number)
        kind = page[at]
        if kind == LEAF_TABLE:
            leaves.append(number)
            return
        assert kind == INTERIOR_TABLE, f"page {number} of {table} has type {kind:#x}"
        cells = int.from_bytes(page[at + 3:at + 5], "big")
        for i in range(cells):
            pointer = int.from_bytes(page[at + 12 + 2 * i:at + 14 + 2 * i], "big")
            walk(int.from_bytes(page[pointer:pointer + 4], "big"))
        walk(int.from_bytes(page[at + 8:at + 12], "big"))  # the right-most child

    walk(root)
    return leaves


def damage_page(db: Path, number: int, length: int = 600) -> None:
    """Overwrite `length` bytes of the page after its 8-byte header (its cell pointers and first
    cells) with 0xFF: the page type survives, its cells point nowhere."""
    con = sqlite3.connect(db)
    try:
        size = con.execute("PRAGMA page_size").fetchone()[0]
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every committed page in the main file
    finally:
        con.close()
    with db.open("r+b") as fh:
        fh.seek((number - 1) * size + _header_offset(number) + 8)
        fh.write(b"\xff" * length)


def damage_middle_leaf(db: Path, table: str) -> int:
    """Damage a leaf page from the middle of `table`; returns its number."""
    leaves = leaf_pages(db, table)
    assert len(leaves) >= 3, f"{table} has {len(leaves)} leaf pages; the test needs a bigger table"
    victim = leaves[len(leaves) // 2]
    damage_page(db, victim)
    return victim
