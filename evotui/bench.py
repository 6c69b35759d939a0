"""`evotui bench`: the same task, budget and seeds under each mode, side by side in one run.

Every run gets a fresh simulated backend with identical settings (profile, time scale, seed),
so the only difference between rows is the execution mode. Throughput is proposals per
*simulated* minute of pipeline time; figures are medians over seeds with min-max spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path

from engine.runner import EngineRun, SetupError

MODES = {
    "sync": {"pipeline": {"mode": "sync"}},
    "async": {"pipeline": {"mode": "async", "policy": "full"}},
    "async-guarded": {"pipeline": {"mode": "async", "policy": "guarded", "max_gap": 2}},
}


async def run_one(task: str, mode: str, seed: int, profile: str, proposals: int, time_scale: float | None, db: Path) -> dict:
    sim: dict = {"profile": profile, "seed": seed}
    if time_scale is not None:
        sim["time_scale"] = time_scale
    layer = {"seed": seed, "sim": sim, "budget": {"max_proposals": proposals}, **MODES[mode]}
    run = await EngineRun.create(task, [("bench", layer)], db)
    result = await run.run()
    s = result.summary
    state = run.sim_state
    util = state.throughput_utilization() if state is not None else None
    return {
        "mode": mode,
        "seed": seed,
        "status": result.status,
        "proposals": s["proposals"],
        "proposals_per_min": s["proposals_per_min"] or 0.0,
        "pipeline_minutes": s["pipeline_minutes"],
        "best_score": s["best_score"],
        "seed_score": s["seed_score"],
        "accepted": s["accepted"],
        "tokens_generated": s["completion_tokens"],
        "tokens_wasted": s["wasted_tokens"],
        "discarded_stale": s["discarded_stale"],
        "utilization": util,
        "wall_s": s["wall_s"],
        "best_history": [list(p) for p in run.ctx.best_history],
    }


def best_at(history: list[list[float]], t: float) -> float | None:
    """Best validation score reached by wall time t (history: (elapsed, best) on improvement)."""
    reached = [score for when, score in history if when <= t]
    return max(reached) if reached else None


def add_equal_time_scores(results: dict[str, list[dict]]) -> None:
    """For each seed, score every mode at the moment the fastest mode finished its budget."""
    seeds = {r["seed"] for rows in results.values() for r in rows}
    for seed in seeds:
        rows = [r for rows in results.values() for r in rows if r["seed"] == seed]
        horizon = min(r["wall_s"] for r in rows)
        for r in rows:
            r["best_at_equal_time"] = best_at(r["best_history"], horizon)


def _agg(rows: list[dict], key: str) -> tuple[float | None, float | None, float | None]:
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return None, None, None
    return statistics.median(vals), min(vals), max(vals)


def summarise(results: dict[str, list[dict]], profile: str) -> list[dict]:
    sync_med = _agg(results.get("sync", []), "proposals_per_min")[0]
    out = []
    for mode, rows in results.items():
        med, lo, hi = _agg(rows, "proposals_per_min")
        out.append(
            {
                "mode": mode,
                "profile": profile,
                "simulated": True,
                "seeds": len(rows),
                "proposals_per_min": med,
                "proposals_per_min_min": lo,
                "proposals_per_min_max": hi,
                "ratio_vs_sync": (med / sync_med) if med is not None and sync_med else None,
                "best_score": _agg(rows, "best_score")[0],
                "best_at_equal_time": _agg(rows, "best_at_equal_time")[0],
                "seed_score": _agg(rows, "seed_score")[0],
                "utilization": _agg(rows, "utilization")[0],
                "tokens_generated": _agg(rows, "tokens_generated")[0],
                "tokens_wasted": _agg(rows, "tokens_wasted")[0],
                "runs": rows,
            }
        )
    return out


def print_table(rows: list[dict], proposals: int) -> None:
    def f(v, spec=".2f"):
        return "-" if v is None else format(v, spec)

    print(f"evotui bench -- SIMULATED backend, profile {rows[0]['profile']}, {proposals} proposals per run, "
          f"{rows[0]['seeds']} seed(s); medians (min-max)")
    print("best = best validation score at equal proposals; best@t = at the time the fastest mode finished; "
          "util = generated tokens / (elapsed x peak throughput)")
    print(f"{'mode':14} {'proposals/sim-min':>24} {'x sync':>7} {'best':>6} {'best@t':>6} {'seed':>6} {'util':>6} "
          f"{'tok gen':>9} {'tok wasted':>10}")
    for r in rows:
        spread = f"{f(r['proposals_per_min'])} ({f(r['proposals_per_min_min'])}-{f(r['proposals_per_min_max'])})"
        print(
            f"{r['mode']:14} {spread:>24} {f(r['ratio_vs_sync']):>7} {f(r['best_score'], '.3f'):>6} "
            f"{f(r['best_at_equal_time'], '.3f'):>6} "
            f"{f(r['seed_score'], '.3f'):>6} {f(r['utilization'], '.2f'):>6} {f(r['tokens_generated'], '.0f'):>9} "
            f"{f(r['tokens_wasted'], '.0f'):>10}"
        )


def main(args: argparse.Namespace) -> int:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        print(f"evotui: error: unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    if "sync" not in modes:
        modes.insert(0, "sync")
    if args.seeds < 1 or args.proposals < 1:
        print("evotui: error: --seeds and --proposals must be at least 1", file=sys.stderr)
        return 2

    async def go() -> dict[str, list[dict]]:
        results: dict[str, list[dict]] = {m: [] for m in modes}
        with tempfile.TemporaryDirectory(prefix="evotui-bench-") as tmp:
            for seed in range(args.seeds):
                for mode in modes:
                    db = Path(tmp) / f"{mode}-{seed}.db"
                    row = await run_one(args.task, mode, seed, args.profile, args.proposals, args.time_scale, db)
                    results[mode].append(row)
                    if not args.json:
                        print(f"  {mode:14} seed {seed}: {row['proposals_per_min']:.2f} proposals/sim-min, "
                              f"best {row['best_score']:.3f}", file=sys.stderr, flush=True)
        return results

    try:
        results = asyncio.run(go())
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    add_equal_time_scores(results)
    rows = summarise(results, args.profile)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(rows, args.proposals)
    return 0
