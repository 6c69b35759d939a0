"""`evotui components RUN [COMPONENT] [--diff V1 V2]` (component versions) and `evotui audit RUN`
(the audit rows of an audited strategy such as sepl): read-only views of a database."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.components.versions import describe, diff
from engine.components import DEFAULT_TYPE
from engine.run.admin import AdminError, _open_readonly, find_artifact, run_versions


def components_arguments(com, default_db: Path) -> None:
    com.add_argument("run_id", help="run id (see `evotui runs`)")
    com.add_argument("component", nargs="?", help="one component (default: all)")
    com.add_argument("--diff", nargs=2, metavar=("V1", "V2"), help="unified diff between two versions (X.Y.Z)")
    com.add_argument("--db", type=Path, default=default_db, help=f"SQLite database (default {default_db})")
    com.add_argument("--json", action="store_true")


def edit_arguments(edt, default_db: Path) -> None:
    edt.add_argument("run_id", help="run id of a live run (see `evotui runs`)")
    edt.add_argument("component", help="the component to edit (evolvable ones only)")
    src = edt.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the component's new text")
    src.add_argument("--file", type=Path, help="a file holding the component's new text")
    edt.add_argument("--reason", default="", metavar="TEXT", help="why (kept in the pool event and audit row)")
    edt.add_argument("--db", type=Path, default=default_db, help=f"SQLite database (default {default_db})")


def audit_arguments(aud, default_db: Path) -> None:
    aud.add_argument("run_id", help="run id (see `evotui runs`)")
    aud.add_argument("--item", help="one item's transitions")
    aud.add_argument("--db", type=Path, default=default_db, help=f"SQLite database (default {default_db})")
    aud.add_argument("--json", action="store_true")


async def components_main(args: argparse.Namespace) -> list[str] | str:
    """Lines to print (or a JSON text); AdminError for bad input."""
    from evotui.library.admin import versions_async

    info = await versions_async(args.run_id, db=args.db, component=args.component)
    if args.diff:
        if args.component is None:
            raise AdminError("--diff V1 V2 needs a COMPONENT: `evotui components RUN COMPONENT --diff V1 V2`")
        versions = await run_versions(args.db, args.run_id)
        a, b = (versions.index.find(args.component, v) for v in args.diff)
        missing = [v for v, cv in zip(args.diff, (a, b)) if cv is None]
        if missing:
            known = ", ".join(v["version"] for v in info["components"][args.component]["versions"])
            raise AdminError(f"run {args.run_id} has no version {', '.join(missing)} of {args.component} (it has "
                             f"{known})")
        text = diff(a, b)
        return json.dumps({"component": args.component, "from": a.to_dict(), "to": b.to_dict(), "diff": text}) \
            if args.json else (text.splitlines() or [f"{a.spec} and {b.spec} have the same text"])
    rules = await _rules(args.db, args.run_id, info)
    for name, entry in info["components"].items():
        entry["type"], entry["frozen_regions"] = rules.get(name, (DEFAULT_TYPE, 0))
    if args.json:
        return json.dumps(info)
    versions = await run_versions(args.db, args.run_id)
    lines = [f"run {args.run_id}: active artifact {info['active_artifact'] or '-'} (* = its version)"]
    for name, entry in info["components"].items():
        lines.append(f"{name}: {len(entry['versions'])} version(s), type {entry['type']}, "
                     f"{entry['frozen_regions']} frozen region(s)")
        lines.extend(describe(versions.index.history[name], entry["active"], versions.index.rolled_back))
    return lines


async def _rules(db: Path, run_id: str, info: dict) -> dict[str, tuple[str, int]]:
    """name -> (type, number of frozen regions), as the active artifact (else the run's first
    version's) carries them; a run stored before components had types reads as type text."""
    artifact_id = info["active_artifact"] or next(
        (e["versions"][0]["artifact_id"] for e in info["components"].values() if e["versions"]), None)
    if artifact_id is None:
        return {}
    parts = (await find_artifact(db, run_id, artifact_id, writable=False)).artifact.parts
    return {c.name: (c.type, len(c.frozen)) for c in parts}


async def audit_main(args: argparse.Namespace) -> list[str] | str:
    store = await _open_readonly(args.db)
    try:
        if not await store.fetch_rows("runs", args.run_id):
            raise AdminError(f"no run {args.run_id!r} in {args.db}; list runs with `evotui runs --db {args.db}`")
        rows = await store.fetch_rows("audit", args.run_id)
    finally:
        await store.close()
    if args.item:
        rows = [r for r in rows if r["item_id"] == args.item]
    if args.json:
        return json.dumps(rows)
    if not rows:
        return [f"run {args.run_id} has no audit rows (only an audited strategy writes them: --strategy sepl)"]
    lines = []
    for r in rows:
        d = r.get("detail") or {}
        line = f"{r['item_id']} {r['transition']:<8} {r['decision']:<10} {r['component'] or '-':<14} {r['reason'] or ''}"
        if r["transition"] == "evaluate" and d.get("evaluation"):
            e = d["evaluation"]
            line += f" minibatch {e.get('child_minibatch')} vs parent {e.get('parent_minibatch')}"
            if e.get("val_mean") is not None:
                line += f", val {e['val_mean']:.3f}"
        if r["transition"] == "commit" and d.get("versions"):
            line += " " + ", ".join(f"{n}@{v}" for n, v in d["versions"].items())
        if r["transition"] == "reflect" and d.get("hypothesis"):
            line += " " + d["hypothesis"].splitlines()[0][:100]
        lines.append(line.rstrip())
    return lines


async def edit_main(args: argparse.Namespace) -> list[str]:
    """Send edit_component to the live driver of the run; AdminError when there is none or it refuses."""
    from evotui.library.admin import edit_async

    if args.file is not None:
        try:
            text = args.file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AdminError(f"cannot read {args.file}: {exc}") from None
    else:
        text = args.text
    res = await edit_async(args.run_id, args.component, text, db=args.db, reason=args.reason)
    line = (f"run {args.run_id}: {res['component']}@{res['version']} is active in {res['artifact_id']} "
            f"(val {res['val_mean']:.3f}, from {res['parent_id']}); pool version {res['pool_version']}")
    return [line]
