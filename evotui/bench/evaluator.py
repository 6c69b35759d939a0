"""`evotui bench-evaluator`: evaluations per second, local sandbox vs Ray, on this machine.

The same program (a task's initial program) is evaluated N times at concurrency C by each
backend: the local sandbox, and Ray tasks running that sandbox (a local Ray instance started
for the benchmark with C CPUs, or --ray-address). Each backend first runs one warm-up round of
C evaluations (Ray starts its workers, each worker probes its isolation); then R timed rounds.
The local sandbox is also measured with the candidate imported into the evaluator's own process
([program] eval_candidate_process = false), which prices the candidate's own process.
Printed side by side: the median throughput, the median wall seconds per evaluation slot
(wall x C / N, what one evaluation costs a slot, queueing included), Ray's start-up, and the
ratios: throughput Ray / local and Ray's overhead per evaluation (slot seconds Ray - local).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time

from engine.evaluator import EvaluatorLost, EvaluatorSetupError, LocalEvaluator
from engine.sandbox import Sandbox
from engine.config.service import EvaluatorConfig
from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError


class UsageError(Exception):
    """Bad arguments or a task the benchmark cannot use; shown as one line, exit code 2."""


def add_arguments(p) -> None:
    p.add_argument("--task", default="circle_packing", help="program task whose initial program is evaluated")
    p.add_argument("--evaluations", type=int, default=24, metavar="N", help="evaluations per timed round")
    p.add_argument("--concurrency", type=int, default=2, metavar="C", help="evaluations at once (and Ray CPUs)")
    p.add_argument("--repeats", type=int, default=3, metavar="R", help="timed rounds; the median is shown")
    p.add_argument("--ray-address", metavar="ADDR", help="an existing cluster instead of a local Ray instance")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")


async def _round(service, task, n: int) -> float:
    t0 = time.perf_counter()
    results = await asyncio.gather(*(service.evaluate(task.evaluator, task.initial_program, mode=task.sandbox_mode,
                                                      program_name=task.program_name) for _ in range(n)))
    wall = time.perf_counter() - t0
    bad = [r.reason for r in results if not r.ok]
    if bad:
        raise UsageError(f"{len(bad)} of {n} evaluations failed (first: {bad[0]}); benchmark a task whose initial "
                         "program evaluates")
    return wall


async def _measure(service, task, n: int, c: int, repeats: int) -> dict:
    await _round(service, task, c)  # warm-up: not timed
    walls = [await _round(service, task, n) for _ in range(repeats)]
    wall = statistics.median(walls)
    return {"evals_per_s": round(n / wall, 3), "slot_s_per_eval": round(wall * c / n, 4),
            "walls_s": [round(w, 3) for w in walls]}


async def _bench(args: argparse.Namespace) -> dict:
    from engine.evaluator.ray_backend import RayEvaluator

    task = load_any_task(args.task)
    if task.kind != "program":
        raise UsageError(f"task {task.name} is a {task.kind} task; bench-evaluator evaluates program tasks")
    limits = task.settings.limits()
    n, c = args.evaluations, args.concurrency
    local = LocalEvaluator(Sandbox(limits, concurrency=c))
    # The price of the candidate's own process: the same sandbox with the candidate imported into
    # the evaluator's process (what [program] eval_candidate_process = false does).
    shared = LocalEvaluator(Sandbox(dataclasses.replace(limits, candidate_process=False), concurrency=c))
    out = {"task": task.name, "evaluations": n, "concurrency": c, "repeats": args.repeats,
           "local": await _measure(local, task, n, c, args.repeats),
           "local_shared": await _measure(shared, task, n, c, args.repeats)}
    out["candidate_process_overhead_s_per_eval"] = round(
        out["local"]["slot_s_per_eval"] - out["local_shared"]["slot_s_per_eval"], 4)
    ray_ev = RayEvaluator(EvaluatorConfig(backend="ray", address=args.ray_address, local_num_cpus=c, num_cpus=1,
                                          max_in_flight=c), limits, frozenset())
    t0 = time.perf_counter()
    try:
        await ray_ev.start()
        startup = time.perf_counter() - t0
        out["ray"] = {**await _measure(ray_ev, task, n, c, args.repeats), "startup_s": round(startup, 3),
                      "where": ray_ev.where}
    finally:
        await ray_ev.aclose()
    lo, ra = out["local"], out["ray"]
    out["ratio_throughput_ray_over_local"] = round(ra["evals_per_s"] / lo["evals_per_s"], 3)
    out["ray_overhead_s_per_eval"] = round(ra["slot_s_per_eval"] - lo["slot_s_per_eval"], 4)
    return out


def table(r: dict) -> str:
    lo, ra, sh = r["local"], r["ray"], r["local_shared"]
    rows = [
        (f"bench-evaluator: {r['task']}, {r['evaluations']} evaluations at concurrency {r['concurrency']}, "
         f"median of {r['repeats']} rounds (after one warm-up round)"),
        f"{'':<22}{'local sandbox':>16}{'ray':>16}{'ray / local':>14}",
        (f"{'evaluations / s':<22}{lo['evals_per_s']:>16.3f}{ra['evals_per_s']:>16.3f}"
         f"{r['ratio_throughput_ray_over_local']:>14.3f}"),
        (f"{'slot s / evaluation':<22}{lo['slot_s_per_eval']:>16.4f}{ra['slot_s_per_eval']:>16.4f}"
         f"{ra['slot_s_per_eval'] / lo['slot_s_per_eval']:>14.3f}"),
        (f"{'round walls (s)':<22}{' '.join(f'{w:.2f}' for w in lo['walls_s']):>16}  "
         f"{' '.join(f'{w:.2f}' for w in ra['walls_s']):>16}"),
        (f"ray start-up {ra['startup_s']:.2f} s ({ra['where']}); overhead per evaluation "
         f"{r['ray_overhead_s_per_eval']:+.4f} slot s"),
        (f"candidate in its own process (local) against sharing the evaluator's: {lo['evals_per_s']:.3f} against "
         f"{sh['evals_per_s']:.3f} evaluations / s ({lo['evals_per_s'] / sh['evals_per_s']:.3f}x), "
         f"{r['candidate_process_overhead_s_per_eval']:+.4f} slot s per evaluation"),
    ]
    return "\n".join(rows)


def main(args: argparse.Namespace) -> int:
    try:
        for flag in ("evaluations", "concurrency", "repeats"):
            if getattr(args, flag) < 1:
                raise UsageError(f"--{flag} must be at least 1")
        result = asyncio.run(_bench(args))
    except (UsageError, TaskError, EvaluatorSetupError, EvaluatorLost, ValueError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result) if args.json else table(result))
    return 0
