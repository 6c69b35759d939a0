"""`evotui bench-db`: database growth per proposal with LLM texts off and on, side by side.

The same headless run (task, proposal budget, seed, simulated backend; mode sync by default,
whose runs are identical for a seed, so the two differ only by the texts) goes through `evotui run`
twice, once with `[store] keep_llm_text = false` and once with it true, each into a fresh
database; then each file is measured: bytes on disk, growth over an empty database of the same
schema, that growth per proposal, the bytes of the blobs and llm_calls tables (SQLite's dbstat),
and how much the texts shrank through deduplication and compression.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from evotui import scratch

_TOTAL_REFERENCED = """SELECT
    coalesce((SELECT sum(b.size) FROM llm_calls AS c, json_each(c.request_blobs_json) AS j
              JOIN blobs AS b ON b.id = j.value WHERE c.request_blobs_json IS NOT NULL), 0),
    coalesce((SELECT sum(b.size) FROM llm_calls AS c JOIN blobs AS b ON b.id = c.response_blob), 0),
    (SELECT count(*) FROM llm_calls AS c, json_each(c.request_blobs_json) AS j
     WHERE c.request_blobs_json IS NOT NULL) + (SELECT count(response_blob) FROM llm_calls)"""


class _RunFailed(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", default="rules")
    p.add_argument("--proposals", type=int, default=60, help="proposal budget of each run (default 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=["sync", "async", "pxn", "chain"], default="sync",
                   help="pipeline mode (default sync: the same calls in both runs)")
    p.add_argument("--time-scale", type=float, default=2000.0, help="simulated seconds per wall second")
    p.add_argument("--dir", type=Path, help="keep the two databases in DIR (default: a temporary directory)")
    p.add_argument("--json", action="store_true", help="print the two rows as JSON")


def _files_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


async def _empty_db_bytes(db: Path) -> int:
    """An empty database of the current schema: the fixed cost every run's growth is measured from."""
    from engine.store import Store  # not at import: `evotui --help` builds this parser

    store = await Store.open(db, create=True)
    await store.close()
    return _files_bytes(db)


def _run(args: argparse.Namespace, db: Path, keep: bool) -> dict:
    config = db.with_suffix(".toml")
    config.write_text(f"[store]\nkeep_llm_text = {'true' if keep else 'false'}\n")
    cmd = [sys.executable, "-m", "evotui.cli", "run", args.task, "--no-ui", "--quiet", "--db", str(db),
           "--config", str(config), "--max-proposals", str(args.proposals), "--seed", str(args.seed),
           "--mode", args.mode, "--time-scale", str(args.time_scale)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise _RunFailed(f"`{' '.join(cmd[1:])}` exited {proc.returncode}: {proc.stderr.strip()[-800:]}",
                         proc.returncode)
    summary = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    return summary


def _measure(db: Path, empty: int, summary: dict, keep: bool) -> dict:
    on_disk = _files_bytes(db)
    proposals = int(summary.get("proposals") or 0)
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
        calls, with_text = conn.execute("SELECT count(*), count(request_blobs_json) FROM llm_calls").fetchone()
        blobs, stored, unique_raw = conn.execute(
            "SELECT count(*), coalesce(sum(length(data)), 0), coalesce(sum(size), 0) FROM blobs").fetchone()
        request_raw, response_raw, refs = conn.execute(_TOTAL_REFERENCED).fetchone()
    total_raw = request_raw + response_raw
    return {
        "keep_llm_text": keep,
        "proposals": proposals,
        "llm_calls": calls,
        "calls_with_text": with_text,
        "db_bytes": on_disk,
        "growth_bytes": on_disk - empty,
        "bytes_per_proposal": round((on_disk - empty) / proposals) if proposals else None,
        "llm_calls_table_bytes": tables.get("llm_calls", 0),
        "blobs_table_bytes": tables.get("blobs", 0) + tables.get("sqlite_autoindex_blobs_1", 0),
        "blobs": blobs,
        "text_refs": refs,
        "text_bytes_referenced": total_raw,
        "text_bytes_unique": unique_raw,
        "blob_bytes_stored": stored,
        "dedup_ratio": round(total_raw / unique_raw, 2) if unique_raw else None,
        "compression_ratio": round(unique_raw / stored, 2) if stored else None,
    }


_ROWS = [("proposals", "proposals"), ("llm calls (with text)", None), ("DB bytes on disk", "db_bytes"),
         ("growth over empty DB", "growth_bytes"), ("bytes per proposal", "bytes_per_proposal"),
         ("llm_calls table bytes", "llm_calls_table_bytes"), ("blobs table+index bytes", "blobs_table_bytes"),
         ("blobs", "blobs"), ("text references", "text_refs"),
         ("text bytes referenced", "text_bytes_referenced"), ("text bytes unique", "text_bytes_unique"),
         ("blob bytes stored (zlib)", "blob_bytes_stored"), ("dedup ratio", "dedup_ratio"),
         ("compression ratio", "compression_ratio")]


def _table(off: dict, on: dict, empty: int, args: argparse.Namespace) -> str:
    title = (f"bench-db: {args.task}, {args.proposals} proposals, mode {args.mode}, seed {args.seed}, "
             f"simulated backend (time scale {args.time_scale:g}); empty database {empty} bytes")
    lines = [title, f"{'':26} {'texts off':>12} {'texts on':>12}"]
    for label, key in _ROWS:
        if key is None:
            a, b = f"{off['llm_calls']} ({off['calls_with_text']})", f"{on['llm_calls']} ({on['calls_with_text']})"
        else:
            a, b = ("-" if off[key] is None else off[key]), ("-" if on[key] is None else on[key])
        lines.append(f"{label:26} {a!s:>12} {b!s:>12}")
    if off["bytes_per_proposal"] and on["bytes_per_proposal"]:
        extra = on["bytes_per_proposal"] - off["bytes_per_proposal"]
        lines.append(f"texts cost {extra} bytes per proposal more "
                     f"({100.0 * extra / off['bytes_per_proposal']:+.0f}% over metadata only)")
    return "\n".join(lines)


def _bench(args: argparse.Namespace, where: Path) -> int:
    empty = asyncio.run(_empty_db_bytes(where / "empty.db"))
    rows = []
    for keep in (False, True):
        db = where / f"texts_{'on' if keep else 'off'}.db"
        for old in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            old.unlink(missing_ok=True)
        rows.append(_measure(db, empty, _run(args, db, keep), keep))
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(_table(rows[0], rows[1], empty, args))
    return 0


def main(args: argparse.Namespace) -> int:
    from engine.store import StoreError

    if args.proposals < 1:
        print("evotui: error: --proposals must be at least 1", file=sys.stderr)
        return 2
    try:
        if args.dir is not None:
            if not args.dir.is_dir():
                print(f"evotui: error: --dir {args.dir} is not a directory", file=sys.stderr)
                return 2
            return _bench(args, args.dir)
        with scratch.directory("evotui-bench-db-") as tmp:
            return _bench(args, Path(tmp))
    except _RunFailed as exc:  # the run's own exit code: 2 for a bad task or flag, ...
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (StoreError, sqlite3.Error) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 1
