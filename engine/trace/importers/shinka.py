"""A ShinkaEvolve run database (shinka/database/dbase.py ProgramDatabase: SQLite, `programs` table
with id, code, language, parent_id, generation, timestamp, combined_score, public_metrics,
private_metrics, text_feedback, correct, metadata, island_idx, inspiration ids, code_diff).

The path may be the database file or the results folder holding it (programs.sqlite, or
evolution_db.sqlite of older releases). The file is opened read-only."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from engine.trace.errors import TraceError
from engine.trace.importers.common import NativeCandidate, NativeRun, finite

DB_NAMES = ("programs.sqlite", "evolution_db.sqlite")
_NEEDED = {"id", "code", "parent_id"}


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _columns(path: Path) -> set[str] | None:
    """The programs table's columns, or None if `path` is no SQLite file with one."""
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return None
        con = _connect(path)
        try:
            cols = {row[1] for row in con.execute("PRAGMA table_info(programs)")}
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return None
    return cols or None


def find_database(path: Path) -> Path | None:
    """The ShinkaEvolve database `path` is or holds, else None."""
    files = [path] if path.is_file() else [path / n for n in DB_NAMES] if path.is_dir() else []
    for file in files:
        cols = _columns(file) if file.is_file() else None
        if cols and _NEEDED <= cols and "combined_score" in cols:
            return file
    return None


def _json(raw: Any, where: str) -> Any:
    if raw is None or raw == "":
        return None
    try:
        return json.loads(raw)
    except (TypeError, json.JSONDecodeError):
        raise TraceError(f"{where}: not valid JSON") from None


def read(path: Path) -> NativeRun:
    db = find_database(path)
    if db is None:
        raise TraceError(f"{path}: no ShinkaEvolve database (SQLite with a programs table; "
                         f"{' or '.join(DB_NAMES)} in a results folder)")
    con = _connect(db)
    con.row_factory = sqlite3.Row
    try:
        rows = [dict(r) for r in con.execute("SELECT * FROM programs")]
        try:
            best = con.execute("SELECT value FROM metadata_store WHERE key = 'best_program_id'").fetchone()
        except sqlite3.Error:
            best = None  # older databases have no metadata_store
    except sqlite3.Error as exc:
        raise TraceError(f"{db}: cannot read its programs table ({exc})") from None
    finally:
        con.close()
    candidates, copies = [], {}
    for row in rows:
        where = f"{db} programs row id={row['id']!r}"
        if not isinstance(row["id"], str) or not isinstance(row["code"], str):
            raise TraceError(f"{where}: id and code must be text")
        source_meta = _json(row.get("metadata"), f"{where} metadata") or {}
        if isinstance(source_meta, dict) and source_meta.get("_is_island_copy") and source_meta.get("_original_program_id"):
            # Shinka seeds every island with a copy of the initial program: one artifact, not a proposal.
            copies[row["id"]] = str(source_meta["_original_program_id"])
            continue
        public = _json(row.get("public_metrics"), f"{where} public_metrics") or {}
        score = finite(row.get("combined_score"))
        inspirations = [*(_json(row.get("archive_inspiration_ids"), where) or []),
                        *(_json(row.get("top_k_inspiration_ids"), where) or [])]
        candidates.append(NativeCandidate(
            source_id=row["id"], text=row["code"],
            parent_source_ids=[row["parent_id"]] if row.get("parent_id") else [],
            score=score, iteration=int(row.get("generation") or 0), created_at=float(row.get("timestamp") or 0.0),
            val_scores={"combined_score": score} if score is not None else None,
            meta={"metrics": public, "correct": bool(row.get("correct")), "generation": row.get("generation"),
                  "language": row.get("language"), "island": row.get("island_idx"),
                  "feedback": row.get("text_feedback") or None, "inspiration_ids": inspirations,
                  "source_meta": source_meta}))
    candidates.sort(key=lambda c: (bool(c.parent_source_ids), c.iteration, c.created_at, c.source_id))
    created = min((c.created_at for c in candidates), default=db.stat().st_mtime)
    details = {"database": str(db.resolve()), "source_best_id": best[0] if best else None,
               "island_copies": len(copies)}
    return NativeRun("shinka", db, "program", candidates, created, details, aliases=copies)
