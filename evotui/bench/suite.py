"""`evotui bench --suite NAME`: a declared suite of tasks x rows x seeds x proposals in one run.

The suites are data (evotui/bench/suites.toml, or any TOML file of the same layout given as the
NAME). For every task and row the bench prints: evaluated proposals per simulated minute, the
ratio to the task's sequential reference row, the best at equal proposals (every row of a task
has the same budget), the held-out score (prompt tasks: bench_quality.heldout_score; program
tasks: the task's held-out evaluator), both paired by seed against the reference (mean
difference, standard error, seeds), and the task's record beside its scores. Seeds differ far
more than rows do, so only the paired differences can show a difference of a point; beside each
the seeds it would take for a standard error of 0.004 at the spread seen is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.config import SimConfig
from engine.run.runner import SetupError
from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError
from evotui import scratch
from evotui.bench import run as bench
from evotui.bench import bestofn as bench_bestofn
from evotui.bench import peers as bench_peers
from evotui import peers as peers_mod
from evotui.bench.cascade_variant import slow_variant
from evotui.bench.modes import MODES
from evotui.bench.suite_report import summarise, table
from evotui.peers.sim_endpoint import SimEndpointError

SUITES_FILE = Path(__file__).with_name("suites.toml")
BEST_OF_N = "best-of-n"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SuiteTask(_Strict):
    name: str
    proposals: int = Field(ge=1)
    rows: list[str] = Field(min_length=1)
    reference: str = "sync"
    """The sequential row every other row of the task is compared with (ratio, paired scores)."""
    slow_stage_cpu_s: float | None = Field(None, gt=0)
    """Run a copy of the program task whose evaluation is a cascade with a second stage of this many
    CPU-seconds (evotui/bench/cascade_variant.py: a slow full evaluation, for speculation)."""
    eval_concurrency: int | None = Field(None, gt=0)
    """With slow_stage_cpu_s: evaluations at once in that copy (default: the task's)."""


class Suite(_Strict):
    description: str
    profile: Literal["vllm", "api"] = "vllm"
    time_scale: float | None = Field(None, gt=0)
    zero_latency: bool = False
    """An instant backend (bench.ZERO_LATENCY_SCALE): the code path in seconds, no figures."""
    seeds: int = Field(ge=1)
    first_seed: int = Field(0, ge=0)
    """Seeds run are first_seed, first_seed + 1, ...: a later run extends an earlier sample with new
    seeds, to be paired with it by seed (the JSON keeps each run's seed)."""
    transport: Literal["loopback", "in-process"] = "loopback"
    """How evotui's rows reach the simulator. loopback: a fresh `evotui sim-server` per run, over
    HTTP, exactly as the peer rows reach theirs (equal transport); in-process: the engine's
    simulator in the bench process (no HTTP; for the seconds-long ci suite)."""
    tasks: list[SuiteTask] = Field(min_length=1)


class Record(_Strict):
    value: float
    by: str


class SuiteFile(_Strict):
    suite: dict[str, Suite]
    record: dict[str, Record] = Field(default_factory=dict)


class SuiteError(ValueError):
    """A suite that cannot run as declared (the message says what to change)."""


def load(name: str) -> tuple[str, Suite, dict[str, Record]]:
    """The suite called `name` in suites.toml, or one of another file: FILE.toml:NAME (or
    FILE.toml when the file declares a single suite). SuiteError says what is wrong."""
    path, _, wanted = (name.partition(":") if ".toml" in name else (str(SUITES_FILE), "", name))
    try:
        data = SuiteFile.model_validate(tomllib.loads(Path(path).read_text()))
    except OSError as exc:
        raise SuiteError(f"cannot read the suite file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path} is not valid TOML: {exc}") from None
    except ValidationError as exc:  # every problem on the one line
        raise SuiteError(f"{path}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                 for e in exc.errors())) from None
    if not wanted and len(data.suite) == 1:
        wanted = next(iter(data.suite))
    if wanted not in data.suite:
        raise SuiteError(f"no suite {wanted!r} in {path}; suites are {', '.join(data.suite)}")
    records = data.record
    if Path(path) != SUITES_FILE:  # another file's suite keeps the built-in tasks' records
        builtin = SuiteFile.model_validate(tomllib.loads(SUITES_FILE.read_text())).record
        records = {**builtin, **records}
    return wanted, data.suite[wanted], records


def check(suite: Suite) -> list[tuple[SuiteTask, str]]:
    """Every (task, row) is runnable: known rows, peers of the task's kind, the reference among the
    rows. Returns the peer rows whose package is not installed (they are skipped, not failed)."""
    missing = []
    for t in suite.tasks:
        try:
            loaded = load_any_task(t.name)
        except TaskError as exc:
            raise SuiteError(f"task {t.name!r}: {exc}") from None
        kind = loaded.kind
        if t.reference not in t.rows:
            raise SuiteError(f"task {t.name}: the reference row {t.reference!r} is not among its rows {t.rows}")
        if t.eval_concurrency is not None and t.slow_stage_cpu_s is None:
            raise SuiteError(f"task {t.name}: eval_concurrency applies with slow_stage_cpu_s (add it or remove "
                             "eval_concurrency)")
        if t.slow_stage_cpu_s is not None and getattr(loaded, "format", "") != "native":
            raise SuiteError(f"task {t.name}: slow_stage_cpu_s needs a native program task (remove it)")
        for row in t.rows:
            if row in MODES or row == BEST_OF_N:
                continue
            peer = peers_mod.PEERS.get(row)
            if peer is None:
                raise SuiteError(f"task {t.name}: unknown row {row!r}; rows are evotui's modes ({', '.join(MODES)}), "
                                 f"{BEST_OF_N}, or a peer ({', '.join(peers_mod.PEERS)})")
            if peer.kind != kind:
                raise SuiteError(f"task {t.name} is a {kind} task; peer row {row} runs {peer.kind} tasks")
            if not peers_mod.installed(peer):
                missing.append((t, row))
    return missing


async def run_row(task: SuiteTask, row: str, seed: int, suite: Suite, time_scale: float | None, db: Path,
                  ref: str | None = None) -> dict:
    """ref: where the task is loaded from (a slow variant's folder), default its name."""
    ref = ref or task.name
    if row in peers_mod.PEERS:  # the real library, against a fresh sim-server on loopback
        scale = time_scale if time_scale is not None else SimConfig().time_scale
        got = await asyncio.to_thread(bench_peers.run_peer, peers_mod.PEERS[row], ref, seed, suite.profile,
                                      task.proposals, scale, program_heldout=True)
    else:
        extra = bench_bestofn.layer() if row == BEST_OF_N else {}
        mode = "sync" if row == BEST_OF_N else row
        if suite.transport == "in-process":
            got = await bench.run_one(ref, mode, seed, suite.profile, task.proposals, time_scale, db,
                                      extra or None, program_heldout=True)
        else:
            got = await bench.run_over_loopback(ref, mode, seed, suite.profile, task.proposals, time_scale, db,
                                                extra, program_heldout=True)
    got["mode"] = row
    got["transport"] = "loopback" if row in peers_mod.PEERS else suite.transport
    return got


async def run_suite(suite: Suite, seeds: int, skip: set[tuple[str, str]], log) -> dict[str, dict[str, list[dict]]]:
    """{task: {row: [one result per seed]}}; seeds outermost, so machine drift hits every row alike."""
    time_scale = bench.ZERO_LATENCY_SCALE if suite.zero_latency else suite.time_scale
    results: dict[str, dict[str, list[dict]]] = {t.name: {r: [] for r in t.rows if (t.name, r) not in skip}
                                                 for t in suite.tasks}
    with scratch.directory("evotui-bench-suite-") as tmp:
        refs = {t.name: str(slow_variant(t.name, t.slow_stage_cpu_s, Path(tmp), t.eval_concurrency))
                for t in suite.tasks if t.slow_stage_cpu_s}
        for seed in range(suite.first_seed, suite.first_seed + seeds):
            for t in suite.tasks:
                for row in results[t.name]:
                    db = Path(tmp) / f"{t.name}-{row}-{seed}.db"
                    try:
                        got = await run_row(t, row, seed, suite, time_scale, db, refs.get(t.name))
                    except (bench_peers.PeerFailed, SimEndpointError) as exc:
                        log(f"evotui: warning: {t.name} row {row} seed {seed} failed: {exc}")
                        continue
                    results[t.name][row].append(got)
                    log(f"  {t.name:15} {row:14} seed {seed}: {got['evaluated']} evaluated, best "
                        f"{_fmt(got['best_score'])}, held {_fmt(got['heldout_score'])}")
    return results


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(args: argparse.Namespace) -> int:
    def log(line: str) -> None:
        if not args.json:
            print(line, file=sys.stderr, flush=True)

    try:
        name, suite, records = load(args.suite)
        if args.suite_tasks:
            wanted = [t.strip() for t in args.suite_tasks.split(",") if t.strip()]
            unknown = [t for t in wanted if t not in {st.name for st in suite.tasks}]
            if unknown or not wanted:
                raise SuiteError(f"--suite-tasks: {', '.join(unknown) or 'nothing'} not in suite {name} "
                                 f"(its tasks: {', '.join(t.name for t in suite.tasks)})")
            suite = suite.model_copy(update={"tasks": [t for t in suite.tasks if t.name in wanted]})
        if args.suite_seeds is not None and args.suite_seeds < 1:
            raise SuiteError("--suite-seeds must be at least 1")
        missing = check(suite)
    except SuiteError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    for t, row in missing:  # one line each; the rest of the suite runs
        peer = peers_mod.PEERS[row]
        print(f"evotui: note: {t.name} row {row} skipped: {peer.package} is not installed ({peer.install})",
              file=sys.stderr)
    seeds = args.suite_seeds or suite.seeds
    try:
        results = asyncio.run(run_suite(suite, seeds, {(t.name, r) for t, r in missing}, log))
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    rows = summarise(name, suite, results, records)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    if args.json:
        for r in rows:
            print(json.dumps({k: v for k, v in r.items() if k != "runs"}))
    else:
        print(table(name, suite, rows, seeds))
    return 0

