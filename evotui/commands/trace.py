"""`evotui export`, `import`, `analyze`, `replay` and `tune`: the EvoTrace commands (engine/trace).

Every user mistake (no database, no run, a bad folder, a target that is not empty) is one line
on stderr and exit 2."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from engine.store.store import Store, StoreError
from engine.trace.errors import TraceError
from evotui.commands.trace_db import open_db


def export_arguments(exp: argparse.ArgumentParser, default_db: Path) -> None:
    exp.add_argument("run_id", help="run id (see `evotui runs`)")
    exp.add_argument("target", type=Path, metavar="DIR", help="new (or empty) folder to write")
    exp.add_argument("--format", choices=["evotrace", "gepa"], default="evotrace")
    exp.add_argument("--db", type=Path, default=default_db)


def import_arguments(imp: argparse.ArgumentParser, default_db: Path) -> None:
    imp.add_argument("folder", type=Path, metavar="PATH")
    imp.add_argument("--task", metavar="TASK", help="the task folder (or built-in name) the run evolved; `branch` "
                                                   "continues on it (default: a task folder above PATH, if any)")
    imp.add_argument("--db", type=Path, default=default_db, help="database to add the run to (created if missing)")


def analyze_arguments(ana: argparse.ArgumentParser, default_db: Path) -> None:
    ana.add_argument("run_id", help="run id (see `evotui runs`)")
    ana.add_argument("--db", type=Path, default=default_db)
    ana.add_argument("--json", action="store_true", help="print the analysis as one JSON object")
    ana.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    ana.add_argument("--no-judge", action="store_true", help="skip the edit-type section (no LLM calls)")
    _add_llm_flags(ana)


def replay_arguments(rep: argparse.ArgumentParser, default_db: Path) -> None:
    rep.add_argument("run_id")
    rep.add_argument("candidate", help="candidate id (an artifact, e.g. a000012)")
    rep.add_argument("-n", type=int, default=4, help="replies to draw (default 4)")
    rep.add_argument("--variant", choices=["exact", "no-history", "strict-diff"], default="exact")
    rep.add_argument("--db", type=Path, default=default_db)
    rep.add_argument("--json", action="store_true")
    _add_llm_flags(rep)


def tune_arguments(p: argparse.ArgumentParser, default_db: Path) -> None:
    from evotui.commands import tune as tune_cmd

    tune_cmd.add_arguments(p, default_db, _add_llm_flags)


def _add_llm_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llm-url", help="OpenAI-compatible endpoint (default: the run's reflection endpoint)")
    p.add_argument("--model", help="model name at --llm-url")
    p.add_argument("--llm", choices=["sim"], help="sim: the simulated backend")
    p.add_argument("--api-key-env", help="environment variable holding the endpoint's key")


def _fail(msg: str) -> int:
    print(f"evotui: error: {msg}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_COMMANDS[args.command](args))
    except (TraceError, StoreError) as exc:
        return _fail(str(exc))


async def _export(args: argparse.Namespace) -> int:
    from engine.trace import collect, export

    export.check_target(args.target)  # before reading anything
    store = await open_db(args.db, readonly=True)
    try:
        trace = await collect.collect(store, args.run_id)
    finally:
        await store.close()
    if args.format == "gepa":
        result = export.write_gepa(trace, args.target)
        print(f"wrote {args.target / 'gepa_result.json'}: {len(result['candidates'])} candidates, "
              f"best index {result['best_idx']}")
        return 0
    manifest = export.write_evotrace(trace, args.target)
    files = ", ".join(f"{n} {k}" for k, n in manifest["files"].items())
    print(f"wrote {args.target}: {files}; {manifest['blobs']} blobs")
    return 0


async def _import(args: argparse.Namespace) -> int:
    from engine.trace import importer
    from engine.trace.importers import read_any

    got = read_any(args.folder, task=args.task)  # all checks before the database is touched
    trace = got.trace
    store = await open_db(args.db, readonly=False, create=True)
    try:
        run_id = await importer.write_trace(store, trace, args.folder)
    finally:
        await store.close()
    what = "EvoTrace run" if got.fmt == "evotrace" else f"{got.fmt} run"
    task = (f"task {trace.run['task']} ({trace.run['task_path']}, {got.task_found})" if trace.run.get("task_path")
            else "no task folder (give `--task TASK` to `import` or `branch` to continue it)")
    print(f"imported {what} {trace.run_id} as {run_id} (read-only, status imported): "
          f"{len(trace.candidates)} candidates, {len(trace.edges)} lineage edges, {len(trace.contexts)} LLM calls; "
          f"{task}; see `evotui show {run_id} --db {args.db}`")
    return 0


async def refuse_imported(db: Path, run_id: str | None) -> str | None:
    """The message refusing to resume an imported run, or None when it is not one."""
    if not db.exists():
        return None
    from engine.trace.importer import IMPORTED_STATUS

    try:
        store = await Store.open(db, create=False, readonly=True)
    except StoreError:
        return None  # the resume path reports database problems itself
    try:
        run_id = run_id or await store.latest_run_id()
        rec = await store.load_run(run_id) if run_id else None
    finally:
        await store.close()
    if rec is not None and rec.status == IMPORTED_STATUS:
        return (f"run {run_id} was imported (`evotui import`) and is read-only; it cannot be resumed "
                f"(open it with `evotui show`, `evotui analyze` or `evotui replay`; continue it with `evotui branch`)")
    return None


async def _analyze(args: argparse.Namespace) -> int:
    from evotui.commands import trace_analyze as trace_analyze_cmd

    return await trace_analyze_cmd.run(args)


async def _replay(args: argparse.Namespace) -> int:
    from evotui.commands import trace_replay as trace_replay_cmd

    return await trace_replay_cmd.run(args)


async def _tune(args: argparse.Namespace) -> int:
    from evotui.commands import tune as tune_cmd

    return await tune_cmd.run(args)


_COMMANDS = {"export": _export, "import": _import, "analyze": _analyze, "replay": _replay, "tune": _tune}
