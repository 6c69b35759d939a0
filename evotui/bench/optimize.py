"""`evotui bench --optimize`: GEPA's own `DefaultAdapter`, unchanged, driven by `gepa.optimize`
and by `evotui.optimize` at the same metric-call budget, on a simulated backend (labelled so).

Every row reaches the backend the same way: a fresh `evotui sim-server` per run on loopback (same
profile, seed and time scale), the adapter's task model a plain OpenAI-compatible chat callable
(evotui/peers/chat.py), the reflection model GEPA's callable or evotui's client on the same URL.
The task is `rules` (its train and validation splits as GEPA's trainset and valset, its metric
as the DefaultAdapter's evaluator). Time is the simulator's clock from the first request to the
last (the seed's evaluation included, for both). Best is the best validation mean of the result
(`val_aggregate_scores`), paired by seed; held-out is that candidate on the task's held-out split.

Asymmetries: evotui runs the adapter's `evaluate` calls in worker threads (several batches at
once, each batch still one request after another as the DefaultAdapter sends them); GEPA calls
it from its one loop. Both stop at the budget check of their own engine: GEPA may overshoot its
last full validation, evotui reserves it up front (so it can end a little under).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from pathlib import Path

import httpx

from engine.tasks.loader import load_any_task
from evotui import scratch
from evotui.bench.suite_report import paired
from evotui.bench import quality as bench_quality
from evotui.peers.chat import Chat
from evotui.peers.sim_endpoint import SimEndpoint

ROWS = ("gepa", "evotui-default", "evotui-async")
"""gepa.optimize; evotui.optimize with its default mode; with mode async (the old default).
Also accepted: evotui-sync, evotui-pxn, evotui-chain-N (N chains) and evotui-best-of-n (every
proposal from the seed candidate, fully evaluated: evotui/bench/bestofn.py)."""


def row_options(row: str) -> dict | None:
    """evotui.optimize keyword arguments of an evotui row, or None for an unknown row."""
    if row == "evotui-default":
        return {}
    if row == "evotui-best-of-n":
        from evotui.bench import bestofn  # registers the strategy

        return {"strategy": bestofn.NAME, **bestofn.MODE["pipeline"]}
    mode = row.removeprefix("evotui-")
    if mode in ("async", "sync", "pxn", "chain"):
        return {"mode": mode}
    count = mode.removeprefix("chain-")
    if mode.startswith("chain-") and count.isdigit() and int(count) > 0:
        return {"mode": "chain", "config": {"pipeline": {"chains": int(count)}}}
    return None


class _Data:
    """The rules task as DefaultAdapter data ({"input", "additional_context", "answer"}) and its
    metric as the adapter's evaluator."""

    def __init__(self) -> None:
        self.task = load_any_task("rules")
        self._by_input: dict[str, dict] = {}

    def convert(self, examples) -> list[dict]:
        out = []
        for ex in examples:
            text = self.task.user_message(ex)
            self._by_input[text] = ex
            out.append({"input": text, "additional_context": {}, "answer": ""})
        return out

    def evaluator(self):
        from gepa.adapters.default_adapter.default_adapter import EvaluationResult

        def evaluate(data, response):
            result = self.task.score(self._by_input[data["input"]], response)
            return EvaluationResult(score=result.score, feedback=result.feedback)
        return evaluate


def _sim_now(url: str) -> float:
    return float(httpx.get(f"{url}/sim/metrics", timeout=10.0).json()["sim_now"])


def run_row(row: str, seed: int, profile: str, budget: int, time_scale: float) -> dict:
    """One optimize run of `row` on a fresh simulated backend."""
    from gepa.adapters.default_adapter.default_adapter import DefaultAdapter

    data = _Data()
    train, val = data.convert(data.task.train), data.convert(data.task.val)
    seed_candidate = {"system_prompt": data.task.seed_prompt}
    with SimEndpoint(profile, seed, time_scale) as sim:
        chat = Chat(sim.url)
        adapter = DefaultAdapter(model=chat.complete, evaluator=data.evaluator())
        t0, wall0 = _sim_now(sim.url), time.monotonic()
        try:
            if row == "gepa":
                import gepa

                res = gepa.optimize(seed_candidate=seed_candidate, trainset=train, valset=val, adapter=adapter,
                                    reflection_lm=chat, max_metric_calls=budget, reflection_minibatch_size=3,
                                    seed=seed, display_progress_bar=False, logger=_Quiet())
                calls, status = res.total_metric_calls, "completed"
            else:
                import evotui

                mode = row_options(row) or {}
                with scratch.directory("evotui-bench-optimize-") as tmp:
                    res = evotui.optimize(seed_candidate, train, val, adapter, reflection_llm=sim.url,
                                          max_metric_calls=budget, seed=seed, db=Path(tmp) / "run.db", **mode)
                calls, status = res.total_metric_calls, res.status
            minutes = (_sim_now(sim.url) - t0) / 60.0
        finally:
            chat.close()
    scores = list(res.val_aggregate_scores)
    best_idx = max(range(len(scores)), key=scores.__getitem__)
    best_text = res.candidates[best_idx]["system_prompt"]
    held = asyncio.run(bench_quality.heldout_score(data.task, best_text, seed))
    return {"row": row, "seed": seed, "status": status, "sim_minutes": minutes, "wall_s": time.monotonic() - wall0,
            "metric_calls": calls, "candidates": len(scores), "best": scores[best_idx], "heldout": held}


class _Quiet:
    def log(self, message: str) -> None:
        return None


def report(rows: list[dict], out=sys.stdout) -> None:
    print("rows (simulated backend):", file=out)
    print(f"{'row':<16}{'seeds':>6}{'sim min':>10}{'speed x gepa':>14}{'best':>8}{'held-out':>10}{'metric calls':>14}",
          file=out)
    gepa_min = {r["seed"]: r["sim_minutes"] for r in rows if r["row"] == "gepa"}
    for name in dict.fromkeys(r["row"] for r in rows):
        mine = [r for r in rows if r["row"] == name]
        if not mine:
            continue
        ratios = [gepa_min[r["seed"]] / r["sim_minutes"] for r in mine if r["seed"] in gepa_min and r["sim_minutes"] > 0]
        held = [r["heldout"] for r in mine if r["heldout"] is not None]
        print(f"{name:<16}{len(mine):>6}{statistics.fmean(r['sim_minutes'] for r in mine):>10.2f}"
              f"{statistics.geometric_mean(ratios) if ratios else math.nan:>14.2f}"
              f"{statistics.fmean(r['best'] for r in mine):>8.3f}"
              f"{statistics.fmean(held) if held else math.nan:>10.3f}"
              f"{statistics.fmean(r['metric_calls'] for r in mine):>14.1f}", file=out)
    print("paired by seed against gepa (mean difference +- standard error, n):", file=out)
    for name in [n for n in dict.fromkeys(r["row"] for r in rows) if n != "gepa"]:
        for key in ("best", "heldout"):
            pair = paired([r for r in rows if r["row"] == name], [r for r in rows if r["row"] == "gepa"], key)
            if pair is not None:
                se = math.nan if pair["se"] is None else pair["se"]
                print(f"  {name} - gepa, {key}: {pair['mean_diff']:+.4f} +- {se:.4f} (n={pair['seeds']})", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evotui.bench.optimize", description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=6)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--budget", type=int, default=150, help="max_metric_calls of every run (default 150)")
    p.add_argument("--profile", default="vllm", help="simulator profile (vllm or api)")
    p.add_argument("--time-scale", type=float, default=20.0, help="simulated seconds per wall second")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    args = p.parse_args(argv)
    try:
        import gepa  # noqa: F401
    except ImportError:
        print("evotui bench --optimize: the gepa package is not installed; pip install -e '.[peers]'", file=sys.stderr)
        return 2
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in wanted if r != "gepa" and row_options(r) is None]
    if unknown:
        print(f"evotui bench --optimize: unknown row {unknown[0]!r}; rows are gepa, evotui-default, "
              "evotui-async, evotui-sync, evotui-pxn, evotui-chain-N, evotui-best-of-n", file=sys.stderr)
        return 2
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for row in wanted:
            rows.append(run_row(row, seed, args.profile, args.budget, args.time_scale))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
