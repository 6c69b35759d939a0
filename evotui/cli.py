"""`evotui` command line. Exit codes:

0 completed (budget reached and drained) · 1 internal error · 2 bad input (task, config, flags,
database, a run another process drives) · 3 LLM endpoint unusable (unreachable, unknown model,
auth) · 4 no progress (every attempt skipped or failed, see budget.max_stalled) · 5 the database
could not be written (disk full, I/O error; resumable) · 130 interrupted by a signal or stopped
(resumable with `evotui resume`) · 141 stdout closed early (`evotui runs | head -1`): the
command ends quietly, as a command killed by SIGPIPE reports in a shell (128 + 13).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from engine.config import ConfigError
from engine.store.errors import StoreError
from evotui import bench_modes, options
from evotui.peers import lifeline

DEFAULT_DB = Path(os.environ.get("EVOTUI_DB", "evotui.db"))
EXIT_STDOUT_CLOSED = 128 + 13  # SIGPIPE's number: what `set -o pipefail` scripts see for `cat | head`


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evotui", description="Asynchronous LLM-driven evolution of programs and prompts (FlashEvolve).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="start a run on a task folder or built-in task")
    run.add_argument("task", help="task folder, or the name of a built-in task (e.g. rules)")
    options.add_run_flags(run)
    run.add_argument("--dry-run", action="store_true", help="print the cost estimate (`evotui estimate`) and exit")
    _add_common(run)

    res = sub.add_parser("resume", help="continue an interrupted run (default: the latest in --db)")
    res.add_argument("run_id", nargs="?", help="run id (see `evotui runs`)")
    options.add_resume_flags(res)
    _add_common(res)

    att = sub.add_parser("attach", help="open the UI on a run another process drives (read-only unless it serves control)")
    att.add_argument("run_id", nargs="?", help="run id (default: the latest in --db)")
    att.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")
    _add_ui_flags(att)

    bui = sub.add_parser("bench-ui", help="throughput of the same run headless and under the TUI")
    bui.add_argument("task", nargs="?", default="rules")
    bui.add_argument("--proposals", type=int, default=40)
    bui.add_argument("--time-scale", type=float, default=100.0)
    bui.add_argument("--repeats", type=int, default=3, help="runs per front end (median reported)")
    bui.add_argument("--size", default="160x48", help="TUI terminal size, WxH")
    bui.add_argument("--json", action="store_true")
    bui.add_argument("--bytes-sizes", default="80x24,160x48", help="pty sizes for the terminal-traffic runs")
    bui.add_argument("--bytes-window", type=float, default=5.0, help="seconds counted running, then paused")
    bui.add_argument("--bytes-only", action="store_true", help="only the terminal traffic")
    bui.add_argument("--no-bytes", action="store_true", help="only the throughput")

    strat = sub.add_parser("strategies", help="list the search strategies (--strategy NAME)")
    strat.add_argument("--verbose", "-v", action="store_true", help="also show each strategy's parts")

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
    bench.add_argument("--proposals", type=int, default=48, help="proposal budget per run (default 48)")
    bench.add_argument("--modes", default=None, help=f"comma-separated, from: {', '.join(bench_modes.MODES)} "
                       f"(default: {bench_modes.DEFAULT_MODES.replace(',', ', ')})")
    bench.add_argument("--time-scale", type=float, default=None, help="simulated seconds per wall second")
    bench.add_argument("--json", action="store_true", help="print one JSON object per mode instead of a table")
    bench.add_argument("--out", type=Path, metavar="FILE", help="also write the per-mode results as JSON to FILE")
    bench.add_argument("--zero-latency", action="store_true",
                       help="measure engine overhead: instant backend, report LLM calls/s and proposals/s")
    bench.add_argument("--strategies", metavar="A,B", help="compare search strategies (e.g. gepa,openevolve,loongflow) "
                       "under --modes (default sync,async): evaluations to target, best, proposals/min")
    bench.add_argument("--peers", metavar="A,B", help="also run the real libraries as rows: gepa, gepa-pxn (prompt "
                       "tasks), openevolve (program tasks); needs pip install -e '.[peers]'")
    bench.add_argument("--target-fraction", type=float, default=0.9,
                       help="with --strategies: the target is this fraction of the best any run reached (default 0.9)")
    from evotui import bench_real, local_cmd

    bench_real.add_flags(bench)  # --llm-url URL / --llm local: sync vs async on a real server
    local_cmd.add_parser(sub)  # evotui local serve
    from evotui import bench_db

    bench_db.add_parser(sub)  # evotui bench-db: database bytes per proposal, LLM texts off/on

    from evotui import trace_cmd

    trace_cmd.add_parsers(sub, DEFAULT_DB)  # evotui export / import / analyze / replay / tune (EvoTrace)
    from evotui import bench_evaluator

    bench_evaluator.add_parser(sub)  # evotui bench-evaluator: local sandbox vs Ray
    from evotui import recover_cmd

    recover_cmd.add_parser(sub)  # evotui recover DB OUT: salvage a damaged database
    from evotui import config_cmd

    config_cmd.add_parser(sub)  # evotui config schema / show
    from evotui import estimate_cmd

    estimate_cmd.add_parser(sub, DEFAULT_DB)  # evotui estimate TASK: cost before spending

    rst = sub.add_parser("restore", help="make an earlier validated artifact the run's active best (audited)")
    rst.add_argument("run_id", help="run id (see `evotui runs`)")
    rst.add_argument("artifact_id", help="artifact id (see `evotui show RUN`) or component version NAME@X.Y.Z")
    rst.add_argument("--reason", default="", metavar="TEXT", help="why (kept in the audit row)")
    rst.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")

    bra = sub.add_parser("branch", help="start a new run seeded with an artifact of a run (its task and config)")
    bra.add_argument("run_id", help="run id (see `evotui runs`)")
    bra.add_argument("artifact_id", help="artifact id (see `evotui show RUN`) or component version NAME@X.Y.Z")
    bra.add_argument("--task", metavar="TASK", help="task folder (or built-in name) to continue on instead of the "
                                                   "run's (an imported run may record none)")
    options.add_run_flags(bra)
    _add_common(bra)

    from evotui import components_cmd

    components_cmd.add_parsers(sub, DEFAULT_DB)  # evotui components / edit / audit

    sim = sub.add_parser("sim-server", help="serve the simulated backend on 127.0.0.1 over HTTP")
    sim.add_argument("--port", type=int, default=8000)
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--profile", choices=["vllm", "api"], default="vllm")
    sim.add_argument("--time-scale", type=float, default=None)
    sim.add_argument("--seed", type=int, default=0)
    lifeline.add_argument(sim)
    return p


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB}, or $EVOTUI_DB)")
    p.add_argument("--no-ui", action="store_true", help="run headless: progress on stderr, summary JSON on stdout")
    p.add_argument("--events", type=Path, metavar="FILE", help="append JSONL events to FILE (- for stdout)")
    p.add_argument("--progress-every", type=float, default=2.0, metavar="SECONDS")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    _add_ui_flags(p)


def _add_ui_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theme", metavar="NAME", help="UI theme (themes/*.toml or a Textual theme); default evotui-dark")
    p.add_argument("--no-mouse", action="store_true", help="UI: no mouse reporting (less traffic over SSH)")
    p.add_argument("--ui-config", type=Path, metavar="FILE", help="UI settings TOML (theme, keymap, refresh_hz); or $EVOTUI_UI_CONFIG")


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (`| head -1`): nothing is left to say to it, so end without
    a traceback. Later writes, the interpreter's final flush included, go to /dev/null instead of
    raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_STDOUT_CLOSED


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command.startswith("bench"):  # their scratch databases go with them, even on SIGTERM
        from evotui import scratch

        scratch.remove_on_sigterm()
    try:
        return _dispatch(args)
    except (UsageError, ConfigError, StoreError) as exc:
        # StoreError: a database the user must act on (damaged, newer, unwritable) that no
        # command caught on the way; DamagedDatabase's message names `evotui recover`.
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evotui: interrupted", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("export", "import", "analyze", "replay", "tune"):
        from evotui import trace_cmd

        return trace_cmd.main(args)
    if args.command == "resume":
        from evotui import trace_cmd

        refusal = asyncio.run(trace_cmd.refuse_imported(args.db, args.run_id))
        if refusal:
            raise UsageError(refusal)
    if args.command == "estimate" or getattr(args, "dry_run", False):
        from evotui import estimate_cmd

        return estimate_cmd.main(args)
    if args.command in ("run", "resume"):
        return _run(args)
    if args.command == "restore":
        return asyncio.run(_restore(args))
    if args.command in ("components", "audit", "edit"):
        return _components(args)
    if args.command == "branch":
        return _branch(args)
    if args.command == "attach":
        from evotui.tui.launch import run_attach

        return run_attach(args)
    if args.command == "strategies":
        return _strategies(args.verbose)
    if args.command == "bench-ui":
        from evotui import bench_ui

        return bench_ui.main(args)
    if args.command in ("runs", "show"):
        from evotui import inspect_cmd

        return asyncio.run(inspect_cmd.main(args))
    if args.command == "local":
        from evotui import local_cmd

        return local_cmd.main(args)
    if args.command == "bench":
        from evotui import bench

        return bench.main(args)
    if args.command == "bench-evaluator":
        from evotui import bench_evaluator

        return bench_evaluator.main(args)
    if args.command == "bench-db":
        from evotui import bench_db

        return bench_db.main(args)
    if args.command == "recover":
        from evotui import recover_cmd

        return recover_cmd.main(args)
    if args.command == "config":
        from evotui import config_cmd

        return config_cmd.main(args)
    if args.command == "sim-server":
        from evotui import sim_server

        return sim_server.main(args)
    raise UsageError(f"unknown command {args.command!r}")


def _strategies(verbose: bool) -> int:
    from engine.strategy import SearchParams, entries
    from engine.strategy.registry import DEFAULT_FOR_KIND

    listed = entries()
    width = max(len(e.name) for e in listed)
    for entry in listed:
        kinds = [k for k, name in DEFAULT_FOR_KIND.items() if name == entry.name]
        default = f"  [default for {' and '.join(kinds)} tasks]" if kinds else ""
        print(f"{entry.name:<{width}}  {entry.summary}{default}")
        if verbose:
            for line in entry.factory(SearchParams()).describe():
                print(f"{'':<{width}}    {line}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if not args.no_ui:
        from evotui.tui.launch import run_tui

        return run_tui(args)
    return _headless(args, lambda: options.open_run(args))


def _headless(args: argparse.Namespace, open_run) -> int:
    """Drive the run open_run() makes without a UI: progress, the closing line, the summary.
    A run that cannot start is one line on stderr and its exit code (2 for bad input)."""
    from engine.run_admin import AdminError
    from engine.runner import SetupError
    from evotui.headless import Terminal, drive, report

    async def go() -> int:
        try:
            run = await open_run()
        except (SetupError, AdminError) as exc:
            print(f"evotui: error: {exc}", file=sys.stderr)
            return exc.exit_code if isinstance(exc, SetupError) else 2
        term = Terminal(sys.stderr)
        result = await drive(run, events_path=args.events, progress_every=args.progress_every, quiet=args.quiet,
                             term=term)
        report(term, run, result, f"evotui resume {result.summary['run_id']} --db {args.db} --no-ui")
        return result.exit_code

    return asyncio.run(go())


async def _restore(args: argparse.Namespace) -> int:
    """Through the live driver's control socket when a process drives the run, else offline."""
    from engine.run_admin import AdminError
    from evotui.admin_api import restore_async

    try:
        print((await restore_async(args.run_id, args.artifact_id, db=args.db, reason=args.reason, by="cli")).line())
    except AdminError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _components(args: argparse.Namespace) -> int:
    from engine.run_admin import AdminError
    from evotui import components_cmd

    main = {"components": components_cmd.components_main, "audit": components_cmd.audit_main,
            "edit": components_cmd.edit_main}[args.command]
    try:
        out = asyncio.run(main(args))
    except AdminError as exc:
        raise UsageError(str(exc)) from None
    print(out if isinstance(out, str) else "\n".join(out))
    return 0


def _branch(args: argparse.Namespace) -> int:
    if not args.no_ui:
        raise UsageError("branch runs headless: add --no-ui (watch it with `evotui attach NEW_RUN`)")
    from engine.run_admin import branch_source
    from engine.runner import EngineRun

    async def open_branch():
        source = await branch_source(args.db, args.run_id, args.artifact_id, task=args.task)
        return await EngineRun.create_branch(source, options.config_layers(args), args.db)

    return _headless(args, open_branch)


if __name__ == "__main__":
    sys.exit(main())
