"""`evotui` command line. Exit codes:

0 completed (budget reached and drained) · 1 internal error · 2 bad input (task, config, flags,
database) · 3 LLM endpoint unusable (unreachable, unknown model, auth) · 130 interrupted by a
signal or stopped (resumable with `evotui resume`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from engine.config import ConfigError
from evotui import options

DEFAULT_DB = Path(os.environ.get("EVOTUI_DB", "evotui.db"))


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evotui", description="Asynchronous LLM-driven evolution of prompts (FlashEvolve).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="start a run on a task folder or built-in task")
    run.add_argument("task", help="task folder, or the name of a built-in task (e.g. rules)")
    options.add_run_flags(run)
    _add_common(run)

    res = sub.add_parser("resume", help="continue an interrupted run (default: the latest in --db)")
    res.add_argument("run_id", nargs="?", help="run id (see `evotui runs`)")
    options.add_budget_flags(res)
    _add_common(res)

    runs = sub.add_parser("runs", help="list runs in a database")
    runs.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")
    runs.add_argument("--json", action="store_true")

    show = sub.add_parser("show", help="summarise one run")
    show.add_argument("run_id", nargs="?", help="run id (default: the latest)")
    show.add_argument("--db", type=Path, default=DEFAULT_DB)
    show.add_argument("--json", action="store_true")

    bench = sub.add_parser("bench", help="compare sync and async proposal throughput side by side")
    bench.add_argument("task", nargs="?", default="rules")
    bench.add_argument("--profile", choices=["vllm", "api"], default="vllm")
    bench.add_argument("--seeds", type=int, default=3, help="seeds per mode (default 3)")
    bench.add_argument("--proposals", type=int, default=24, help="proposal budget per run (default 24)")
    bench.add_argument("--modes", default="sync,async", help="comma-separated: sync,async,async-guarded")
    bench.add_argument("--time-scale", type=float, default=None, help="simulated seconds per wall second")
    bench.add_argument("--json", action="store_true", help="print one JSON object per mode instead of a table")

    sim = sub.add_parser("sim-server", help="serve the simulated backend on 127.0.0.1 over HTTP")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--profile", choices=["vllm", "api"], default="vllm")
    sim.add_argument("--time-scale", type=float, default=None)
    sim.add_argument("--seed", type=int, default=0)
    return p


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB}, or $EVOTUI_DB)")
    p.add_argument("--no-ui", action="store_true", help="run headless: progress on stderr, summary JSON on stdout")
    p.add_argument("--events", type=Path, metavar="FILE", help="append JSONL events to FILE (- for stdout)")
    p.add_argument("--progress-every", type=float, default=2.0, metavar="SECONDS")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return _dispatch(args)
    except (UsageError, ConfigError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evotui: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("run", "resume"):
        return _run(args)
    if args.command in ("runs", "show"):
        from evotui import inspect_cmd

        return asyncio.run(inspect_cmd.main(args))
    if args.command == "bench":
        from evotui import bench

        return bench.main(args)
    if args.command == "sim-server":
        from evotui import sim_server

        return sim_server.main(args)
    raise UsageError(f"unknown command {args.command!r}")


def _run(args: argparse.Namespace) -> int:
    if not args.no_ui:
        raise UsageError("the terminal UI is not available yet; pass --no-ui to run headless")
    from engine.runner import EngineRun, SetupError
    from evotui.headless import drive

    async def go() -> int:
        try:
            if args.command == "run":
                run = await EngineRun.create(args.task, options.config_layers(args), args.db)
            else:
                run = await EngineRun.resume(args.db, args.run_id, options.budget_layer(args))
        except SetupError as exc:
            print(f"evotui: error: {exc}", file=sys.stderr)
            return exc.exit_code
        result = await drive(run, events_path=args.events, progress_every=args.progress_every, quiet=args.quiet)
        if result.status == "failed":
            print(f"evotui: run failed: {result.reason}", file=sys.stderr)
        elif result.status == "interrupted":
            print(f"evotui: run interrupted; continue with: evotui resume {result.summary['run_id']} --db {args.db} --no-ui", file=sys.stderr)
        print(json.dumps(result.summary, indent=None, sort_keys=False))
        return result.exit_code

    return asyncio.run(go())


if __name__ == "__main__":
    sys.exit(main())
