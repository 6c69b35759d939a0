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
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.config import ConfigError
from engine.store.errors import StoreError
from evotui import options
from evotui.bench import modes as bench_modes
from evotui.peers import lifeline

DEFAULT_DB = Path(os.environ.get("EVOTUI_DB", "evotui.db"))
EXIT_STDOUT_CLOSED = 128 + 13  # SIGPIPE's number: what `set -o pipefail` scripts see for `cat | head`


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Command:
    """One subcommand, declared once: its name, its `--help` line, the function adding its
    arguments to its sub-parser and the handler it runs (args -> exit code)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]
    scratch: bool = False  # its scratch databases go with it, even on SIGTERM


def _lazy(ref: str, *bound):
    """The function "module:name" (imported on first call, so `evotui runs` does not import the
    TUI or the bench), called with the caller's arguments and then `bound`."""
    module, _, name = ref.partition(":")

    def call(*args):
        return getattr(importlib.import_module(module), name)(*args, *bound)

    call.__qualname__ = ref
    return call


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="task folder, or the name of a built-in task (e.g. rules)")
    options.add_run_flags(p)
    p.add_argument("--dry-run", action="store_true", help="print the cost estimate (`evotui estimate`) and exit")
    _add_common(p)


def _resume_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="run id (see `evotui runs`)")
    options.add_resume_flags(p)
    _add_common(p)


def _attach_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="run id (default: the latest in --db)")
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")
    _add_ui_flags(p)


def _bench_ui_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", nargs="?", default="rules")
    p.add_argument("--proposals", type=int, default=40)
    p.add_argument("--time-scale", type=float, default=100.0)
    p.add_argument("--repeats", type=int, default=3, help="runs per front end (median reported)")
    p.add_argument("--size", default="160x48", help="TUI terminal size, WxH")
    p.add_argument("--json", action="store_true")
    p.add_argument("--bytes-sizes", default="80x24,160x48", help="pty sizes for the terminal-traffic runs")
    p.add_argument("--bytes-window", type=float, default=5.0, help="seconds counted running, then paused")
    p.add_argument("--bytes-only", action="store_true", help="only the terminal traffic")
    p.add_argument("--no-bytes", action="store_true", help="only the throughput")


def _strategies_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", "-v", action="store_true", help="also show each strategy's parts")


def _runs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")
    p.add_argument("--json", action="store_true")


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="run id (default: the latest)")
    p.add_argument("--db", type=Path, default=DEFAULT_DB)
    p.add_argument("--json", action="store_true")


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    from evotui.bench import real as bench_real
    from evotui.bench import suite_flags as bench_suite_flags

    p.add_argument("task", nargs="?", default="rules")
    p.add_argument("--profile", choices=["vllm", "api"], default="vllm")
    p.add_argument("--seeds", type=int, default=3, help="seeds per mode (default 3)")
    p.add_argument("--proposals", type=int, default=48, help="proposal budget per run (default 48)")
    p.add_argument("--modes", default=None, help=f"comma-separated, from: {', '.join(bench_modes.MODES)} "
                   f"(default: {bench_modes.DEFAULT_MODES.replace(',', ', ')})")
    p.add_argument("--time-scale", type=float, default=None, help="simulated seconds per wall second")
    p.add_argument("--sim-clock", choices=["virtual", "wall"], default="virtual",
                   help="the sim-servers' clock: virtual (default: the clients' CPU time while they work, a jump "
                        "while they wait; machine load does not change the figures) or wall (wall time x scale)")
    p.add_argument("--json", action="store_true", help="print one JSON object per mode instead of a table")
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the per-mode results as JSON to FILE")
    p.add_argument("--zero-latency", action="store_true",
                   help="measure engine overhead: instant backend, report LLM calls/s and proposals/s")
    p.add_argument("--strategies", metavar="A,B", help="compare search strategies (e.g. gepa,openevolve,loongflow) "
                   "under --modes (default sync,async): evaluations to target, best, proposals/min")
    p.add_argument("--peers", metavar="A,B", help="also run the real libraries as rows: gepa, gepa-pxn (prompt "
                   "tasks), openevolve (program tasks); needs pip install -e '.[peers]'")
    p.add_argument("--target-fraction", type=float, default=0.9,
                   help="with --strategies: the target is this fraction of the best any run reached (default 0.9)")
    bench_real.add_flags(p)  # --llm-url URL / --llm local: sync vs async on a real server
    bench_suite_flags.add_flags(p)  # --suite NAME: a declared suite of tasks x rows (evotui/bench/suite.py)


def _artifact_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", help="run id (see `evotui runs`)")
    p.add_argument("artifact_id", help="artifact id (see `evotui show RUN`) or component version NAME@X.Y.Z")


def _restore_arguments(p: argparse.ArgumentParser) -> None:
    _artifact_arguments(p)
    p.add_argument("--reason", default="", metavar="TEXT", help="why (kept in the audit row)")
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"SQLite database (default {DEFAULT_DB})")


def _branch_arguments(p: argparse.ArgumentParser) -> None:
    _artifact_arguments(p)
    p.add_argument("--task", metavar="TASK", help="task folder (or built-in name) to continue on instead of the "
                                                 "run's (an imported run may record none)")
    options.add_run_flags(p)
    _add_common(p)


def _sim_server_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--config", type=Path, default=None, metavar="FILE.toml",
                   help="serve this file's [sim] table (e.g. a profile evotui sim-calibrate wrote); the flags "
                        "below override it")
    p.add_argument("--profile", choices=["vllm", "api"], default=None, help="serving model (default vllm)")
    p.add_argument("--answers-from", type=Path, action="append", default=[], metavar="DB",
                   help="serve the replies recorded in this run database to the requests they answered "
                        "(repeatable; sim-calibrate --check: a real model's answers, the simulator's timing)")
    p.add_argument("--time-scale", type=float, default=None)
    p.add_argument("--seed", type=int, default=None, help="random stream of the answers (default 0)")
    p.add_argument("--clock", choices=["wall", "virtual"], default="wall",
                   help="simulated time: wall = wall seconds x time scale (default); virtual = the watched "
                        "clients' CPU time while they work, a jump to the next backend event while they wait "
                        "(Linux; benches: load on the machine does not change the figures)")
    p.add_argument("--watch-pid", type=int, default=None, metavar="PID",
                   help="with --clock virtual: the client process whose tree is watched (default: --parent-pid)")
    lifeline.add_argument(p)


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evotui", description="Asynchronous LLM-driven evolution of programs and prompts (FlashEvolve).")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.arguments(sub.add_parser(command.name, help=command.help))
    return p


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
    command = COMMANDS_BY_NAME[args.command]
    if command.scratch:
        from evotui import scratch

        scratch.remove_on_sigterm()
    try:
        return command.handler(args)
    except (UsageError, ConfigError, StoreError) as exc:
        # StoreError: a database the user must act on (damaged, newer, unwritable) that no
        # command caught on the way; DamagedDatabase's message names `evotui recover`.
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evotui: interrupted", file=sys.stderr)
        return 130


def _strategies(args: argparse.Namespace) -> int:
    from engine.strategy import SearchParams, entries
    from engine.strategy.registry import DEFAULT_FOR_KIND, problems

    listed = entries()
    width = max(len(e.name) for e in listed)
    for entry in listed:
        kinds = [k for k, name in DEFAULT_FOR_KIND.items() if name == entry.name]
        default = f"  [default for {' and '.join(kinds)} tasks]" if kinds else ""
        origin = f"  (plug-in: {entry.origin})" if entry.origin != "evotui" else ""
        print(f"{entry.name:<{width}}  {entry.summary}{default}{origin}")
        if args.verbose:
            defaults = entry.options().model_dump() if entry.options is not None else {}
            for line in entry.factory(SearchParams(options={entry.name: defaults})).describe():
                print(f"{'':<{width}}    {line}")
            if defaults:
                print(f"{'':<{width}}    options: [strategy.{entry.name}] {', '.join(defaults)}")
    for problem in problems():
        print(f"evotui: warning: {problem}", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    if getattr(args, "dry_run", False):
        from evotui.commands import estimate as estimate_cmd

        return estimate_cmd.main(args)
    if not args.no_ui:
        from evotui.tui.launch import run_tui

        return run_tui(args)
    return _headless(args, lambda: options.open_run(args))


def _headless(args: argparse.Namespace, open_run) -> int:
    """Drive the run open_run() makes without a UI: progress, the closing line, the summary.
    A run that cannot start is one line on stderr and its exit code (2 for bad input)."""
    from engine.run.admin import AdminError
    from engine.run.runner import SetupError
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


def _resume(args: argparse.Namespace) -> int:
    from evotui.commands import trace as trace_cmd

    refusal = asyncio.run(trace_cmd.refuse_imported(args.db, args.run_id))
    if refusal:
        raise UsageError(refusal)
    return _run(args)


def _inspect(args: argparse.Namespace) -> int:
    from evotui.commands import inspect as inspect_cmd

    return asyncio.run(inspect_cmd.main(args))


def _restore(args: argparse.Namespace) -> int:
    return asyncio.run(_restore_async(args))


async def _restore_async(args: argparse.Namespace) -> int:
    """Through the live driver's control socket when a process drives the run, else offline."""
    from engine.run.admin import AdminError
    from evotui.library.admin import restore_async

    try:
        print((await restore_async(args.run_id, args.artifact_id, db=args.db, reason=args.reason, by="cli")).line())
    except AdminError as exc:
        raise UsageError(str(exc)) from None
    return 0


def _components(args: argparse.Namespace) -> int:
    from engine.run.admin import AdminError
    from evotui.commands import components as components_cmd

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
    from engine.run.admin import branch_source, start_branch

    async def open_branch():
        source = await branch_source(args.db, args.run_id, args.artifact_id, task=args.task)
        return await start_branch(source, options.config_layers(args), args.db)

    return _headless(args, open_branch)


COMMANDS: tuple[Command, ...] = (
    Command("run", "start a run on a task folder or built-in task", _run_arguments, _run),
    Command("resume", "continue an interrupted run (default: the latest in --db)", _resume_arguments, _resume),
    Command("attach", "open the UI on a run another process drives (read-only unless it serves control)",
            _attach_arguments, _lazy("evotui.tui.launch:run_attach")),
    Command("bench-ui", "throughput of the same run headless and under the TUI", _bench_ui_arguments,
            _lazy("evotui.bench.ui:main"), scratch=True),
    Command("strategies", "list the search strategies (--strategy NAME)", _strategies_arguments, _strategies),
    Command("runs", "list runs in a database", _runs_arguments, _inspect),
    Command("show", "summarise one run", _show_arguments, _inspect),
    Command("bench", "compare sync and async proposal throughput side by side", _bench_arguments,
            _lazy("evotui.bench.run:main"), scratch=True),
    Command("local", "the managed local llama.cpp backend (pip install 'evotui[local]')",
            _lazy("evotui.commands.local:add_arguments"), _lazy("evotui.commands.local:main")),
    Command("bench-db", "database bytes per proposal with LLM texts off and on",
            _lazy("evotui.bench.db:add_arguments"), _lazy("evotui.bench.db:main"), scratch=True),
    Command("export", "write a run as an EvoTrace folder (or a GEPA result JSON)",
            _lazy("evotui.commands.trace:export_arguments", DEFAULT_DB), _lazy("evotui.commands.trace:main")),
    Command("import", "load an EvoTrace folder, OpenEvolve checkpoint, ShinkaEvolve database or GEPA run_dir as a "
            "read-only run", _lazy("evotui.commands.trace:import_arguments", DEFAULT_DB), _lazy("evotui.commands.trace:main")),
    Command("analyze", "lineage, cycling and edit types of a run",
            _lazy("evotui.commands.trace:analyze_arguments", DEFAULT_DB), _lazy("evotui.commands.trace:main")),
    Command("replay", "re-issue the prompt that produced a candidate and re-evaluate the replies",
            _lazy("evotui.commands.trace:replay_arguments", DEFAULT_DB), _lazy("evotui.commands.trace:main")),
    Command("tune", "tuning gap: Bayesian optimisation of a program's numeric constants",
            _lazy("evotui.commands.trace:tune_arguments", DEFAULT_DB), _lazy("evotui.commands.trace:main")),
    Command("bench-evaluator", "evaluations per second: local sandbox vs Ray (medians)",
            _lazy("evotui.bench.evaluator:add_arguments"), _lazy("evotui.bench.evaluator:main"), scratch=True),
    Command("recover", "copy what is intact of a damaged database into a new file and report what was lost",
            _lazy("evotui.commands.recover:add_arguments"), _lazy("evotui.commands.recover:main")),
    Command("config", "the run config: its JSON Schema, or the effective values and their layers",
            _lazy("evotui.commands.config:add_arguments"), _lazy("evotui.commands.config:main")),
    Command("estimate", "what a run would cost: seed, per proposal, proposals the budget buys",
            _lazy("evotui.commands.estimate:add_arguments", DEFAULT_DB), _lazy("evotui.commands.estimate:main")),
    Command("restore", "make an earlier validated artifact the run's active best (audited)", _restore_arguments,
            _restore),
    Command("branch", "start a new run seeded with an artifact of a run (its task and config)", _branch_arguments,
            _branch),
    Command("components", "component versions of a run: history, active version, diffs",
            _lazy("evotui.commands.components:components_arguments", DEFAULT_DB), _components),
    Command("edit", "hot-swap: edit a component of a live run's active artifact (control socket)",
            _lazy("evotui.commands.components:edit_arguments", DEFAULT_DB), _components),
    Command("audit", "audit rows of a run (strategy sepl: reflect, select, improve, evaluate, commit)",
            _lazy("evotui.commands.components:audit_arguments", DEFAULT_DB), _components),
    Command("steer", "steer a live run: guidance for the proposer, pin or ban a parent, re-evaluate (control socket)",
            _lazy("evotui.commands.steer:add_arguments", DEFAULT_DB), _lazy("evotui.commands.steer:main")),
    Command("sim-server", "serve the simulated backend on 127.0.0.1 over HTTP", _sim_server_arguments,
            _lazy("evotui.commands.sim_server:main")),
    Command("sim-calibrate", "measure a real server and write a simulator profile (--check: mode ratios, real "
            "vs simulated)", _lazy("evotui.commands.sim_calibrate:add_arguments"), _lazy("evotui.commands.sim_calibrate:main"),
            scratch=True),
)
"""Every subcommand, in `evotui --help` order: a new command is one entry here (and a line in
README's command list, which tests/test_command_table.py checks)."""
COMMANDS_BY_NAME = {command.name: command for command in COMMANDS}


if __name__ == "__main__":
    sys.exit(main())
