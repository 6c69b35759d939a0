"""`evotui bench TASK --strategies gepa,openevolve,loongflow`: search strategies side by side.

Every run has the same task, proposal budget, simulated backend and seed set; only the strategy
and the execution mode (sync, async) differ. Per strategy × mode, medians over seeds (min-max):

- evaluations to target: metric calls (evaluations of proposals, in the order they finished)
  until the first artifact at `--target-fraction` of the best value any run of this bench
  reached (the paper's efficiency measure, with the bench's best standing in for the best known
  value); runs that never reach it are left out of the median and counted (reached k/N);
- best at equal proposals: the best score when the shared proposal budget is spent;
- best at equal tokens: per seed, each run's best once it had spent (prompt + completion
  tokens, every stage) what the thriftiest run of that seed spent in all;
- context tokens and LLM calls per proposal (every stage's, a strategy's agents included);
- proposals per simulated minute of pipeline time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
from pathlib import Path

from engine.run.runner import SetupError
from evotui import scratch
from evotui.bench import run as bench
from evotui.bench.report import emit

DEFAULT_MODES = "sync,async"


def parse_list(spec: str) -> list[str]:
    return [s.strip() for s in spec.split(",") if s.strip()]


def evaluation_trace(db: Path) -> tuple[list[tuple[int, float]], int]:
    """(evaluations finished so far, score) of each committed proposal, in commit order (the
    seed is (0, its score)), and the evaluations of proposals in all."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        done = sorted(t for (t,) in con.execute(
            "SELECT finished_at FROM item_stages WHERE stage = 'evaluate' AND finished_at IS NOT NULL"))
        rows = con.execute("SELECT created_at, status, val_scores_json FROM artifacts "
                           "ORDER BY created_version").fetchall()
    finally:
        con.close()
    out = []
    for created_at, status, scores_json in rows:
        scores = json.loads(scores_json or "{}")
        score = sum(scores.values()) / len(scores) if scores else 0.0
        out.append((0 if status == "seed" else sum(1 for t in done if t <= created_at), score))
    return out, len(done)


def token_trace(db: Path) -> list[tuple[int, float]]:
    """(tokens spent so far, prompt and completion, all stages, score) of each committed
    artifact, in commit order."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        calls = sorted(con.execute("SELECT created_at, prompt_tokens + completion_tokens FROM llm_calls").fetchall())
        rows = con.execute("SELECT created_at, val_scores_json FROM artifacts ORDER BY created_version").fetchall()
    finally:
        con.close()
    out = []
    for created_at, scores_json in rows:
        scores = json.loads(scores_json or "{}")
        spent = sum(n for t, n in calls if t <= created_at)
        out.append((spent, sum(scores.values()) / len(scores) if scores else 0.0))
    return out


def best_within(trace: list[tuple[int, float]], tokens: int) -> float | None:
    reached = [score for spent, score in trace if spent <= tokens]
    return max(reached) if reached else None


def add_equal_token_scores(results: dict[tuple[str, str], list[dict]]) -> None:
    """Per seed, every run's best once it had spent what the thriftiest run of that seed spent."""
    for seed in {r["seed"] for rows in results.values() for r in rows}:
        rows = [r for rows in results.values() for r in rows if r["seed"] == seed]
        budget = min(r["token_trace"][-1][0] for r in rows if r["token_trace"])
        for r in rows:
            r["best_at_equal_tokens"] = best_within(r["token_trace"], budget)


def evaluations_to(trace: list[tuple[int, float]], target: float) -> int | None:
    return next((n for n, score in trace if score >= target), None)


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def summarise(results: dict[tuple[str, str], list[dict]], fraction: float) -> list[dict]:
    best_any = max(r["best_score"] for rows in results.values() for r in rows)
    target = fraction * best_any
    out = []
    for (strategy, mode), rows in results.items():
        reached = [n for r in rows if (n := evaluations_to(r["trace"], target)) is not None]
        out.append({"strategy": strategy, "mode": mode, "runs": len(rows), "target": target,
                    "evals_to_target": reached, "reached": len(reached),
                    "best": [r["best_score"] for r in rows],
                    "best_at_equal_tokens": [r["best_at_equal_tokens"] for r in rows
                                             if r.get("best_at_equal_tokens") is not None],
                    # What the proposer's context costs: prompt tokens of every call, per proposal.
                    "context_tokens_per_proposal": [r["prompt_tokens"] / r["proposals"] for r in rows if r["proposals"]],
                    "llm_calls_per_proposal": [r["llm_calls"] / r["proposals"] for r in rows if r["proposals"]],
                    "proposals_per_min": [r["proposals_per_min"] for r in rows],
                    "metric_calls": [r["metric_calls"] for r in rows]})
    return out


def table(rows: list[dict], task: str, proposals: int, fraction: float) -> str:
    target = rows[0]["target"] if rows else 0.0
    lines = [f"{task}, {proposals} proposals per run, simulated backend; target = {fraction:g} x best of any "
             f"run = {target:.4f}; medians (min-max) over seeds",
             f"{'strategy':13} {'mode':6} {'evals to target':>22} {'reached':>8} {'best at equal proposals':>26} "
             f"{'best at equal tokens':>26} {'prompt tok/proposal':>22} {'calls/proposal':>19} {'proposals/sim-min':>20}"]
    for r in rows:
        lines.append(f"{r['strategy']:13} {r['mode']:6} {_spread([float(v) for v in r['evals_to_target']], '.0f'):>22} "
                     f"{r['reached']}/{r['runs']:<6} {_spread(r['best'], '.4f'):>26} "
                     f"{_spread(r['best_at_equal_tokens'], '.4f'):>26} "
                     f"{_spread(r['context_tokens_per_proposal'], '.0f'):>22} "
                     f"{_spread(r['llm_calls_per_proposal'], '.2f'):>19} "
                     f"{_spread(r['proposals_per_min'], '.2f'):>20}")
    return "\n".join(lines)


async def _run_all(args: argparse.Namespace, strategies: list[str], modes: list[str]) -> dict:
    results: dict[tuple[str, str], list[dict]] = {(s, m): [] for s in strategies for m in modes}
    with scratch.directory("evotui-bench-strategies-") as tmp:
        for seed in range(args.seeds):
            for strategy in strategies:  # interleaved, so machine drift hits every row alike
                for mode in modes:
                    db = Path(tmp) / f"{strategy}-{mode}-{seed}.db"
                    row = await bench.run_one(args.task, mode, seed, args.profile, args.proposals, args.time_scale,
                                              db, {"strategy": {"name": strategy}})
                    row["trace"], row["metric_calls"] = evaluation_trace(db)
                    row["token_trace"] = token_trace(db)
                    results[(strategy, mode)].append(row)
                    if not args.json:
                        print(f"  {strategy:11} {mode:6} seed {seed}: best {row['best_score']:.4f}, "
                              f"{row['proposals_per_min']:.2f} proposals/min", file=sys.stderr, flush=True)
    return results


def main(args: argparse.Namespace) -> int:
    from engine.strategy import entries

    strategies = parse_list(args.strategies)
    known = {e.name for e in entries()}
    unknown = [s for s in strategies if s not in known]
    modes = parse_list(args.modes or DEFAULT_MODES)
    bad_modes = [m for m in modes if m not in bench.MODES]
    if not strategies or unknown or bad_modes:
        what = (f"unknown strategy(ies) {', '.join(unknown)}; strategies are {', '.join(sorted(known))}" if unknown
                else f"unknown mode(s) {', '.join(bad_modes)}; choose from {', '.join(bench.MODES)}" if bad_modes
                else "--strategies names no strategy")
        print(f"evotui: error: {what}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.proposals < 1 or not 0 < args.target_fraction <= 1:
        print("evotui: error: --seeds and --proposals must be at least 1, --target-fraction in (0, 1]", file=sys.stderr)
        return 2
    try:
        results = asyncio.run(_run_all(args, strategies, modes))
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    add_equal_token_scores(results)
    rows = summarise(results, args.target_fraction)
    emit(rows, args.out, args.json, lambda r: table(r, args.task, args.proposals, args.target_fraction))
    return 0
