"""`evotui recover DB OUT`: salvage what is intact of a damaged database into a new file.

Prints per table the rows kept and lost (or --json). Exit 0 once OUT is written, whatever was
lost (the report says what); 2 when DB or OUT cannot be used (nothing is written then).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(rec: argparse.ArgumentParser) -> None:
    rec.add_argument("db", type=Path, metavar="DB", help="the damaged database (only read)")
    rec.add_argument("out", type=Path, metavar="OUT", help="the new database to write (must not exist)")
    rec.add_argument("--json", action="store_true", help="print the report as one JSON object")


def main(args: argparse.Namespace) -> int:
    from engine.store.salvage import salvage

    report = salvage(args.db.expanduser(), args.out.expanduser())  # StoreError: one line, exit 2 (cli.main)
    if args.json:
        print(json.dumps(report.as_dict()))
        return 0
    print(f"{report.source}: {'no damage found by quick_check' if report.problem == 'ok' else report.problem}")
    print(f"{'table':14} {'kept':>8} {'lost':>8}  note")
    for t in report.tables:
        lost = "?" if t.lost is None else str(t.lost)
        print(f"{t.table:14} {t.kept:>8} {lost:>8}  {_note(t)}".rstrip())
    damaged = [t.table for t in report.tables if t.lost != 0 and not t.note.startswith("not copied")]
    verdict = "every row was kept" if report.complete else f"rows lost in {', '.join(damaged)}"
    print(f"wrote {report.out}: {report.kept} rows kept, {verdict}; use it with --db {report.out} "
          f"(e.g. `evotui runs --db {report.out}`)")
    return 0


def _note(t) -> str:
    parts = [t.note or t.damage.unreadable_table]
    if t.damage.skipped:
        ranges = ", ".join(f"{a}-{b}" if b < 2 ** 63 - 1 else f"{a}-end" for a, b in t.damage.skipped[:3])
        parts.append(f"unreadable rowids {ranges}" + (" ..." if len(t.damage.skipped) > 3 else ""))
    if t.damage.unreadable_rows:
        parts.append(f"{t.damage.unreadable_rows} rows unreadable")
    if t.refused:
        parts.append(f"{t.refused} rows refused by the schema")
    if t.orphaned:
        parts.append(f"{t.orphaned} rows of lost runs dropped")
    if t.lost is None:
        parts.append("how many rows were lost is unknown (no count could be read)")
    return "; ".join(p for p in parts if p)
