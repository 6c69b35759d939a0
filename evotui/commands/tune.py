"""`evotui tune`: the front end of engine/trace/tune.py (and tune_add.py for --add)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from engine.trace.llm import Choice


def add_arguments(p: argparse.ArgumentParser, default_db: Path,
                  add_llm_flags: Callable[[argparse.ArgumentParser], None]) -> None:
    p.add_argument("run_id", help="run id (see `evotui runs`)")
    p.add_argument("candidate", help="artifact id of a program (e.g. the best, see `evotui show RUN`)")
    p.add_argument("--db", type=Path, default=default_db)
    p.add_argument("--trials", type=int, default=24, help="sandboxed evaluations (default 24: 8 random + 16 TPE)")
    p.add_argument("--seed", type=int, default=0, help="seed of the TPE sampler (default 0)")
    p.add_argument("--add", action="store_true", help="add the tuned program to the run's pool (operator tune)")
    p.add_argument("--rank", action="store_true",
                   help="let the LLM choose and bound the knobs (one call; the run's proposer endpoint by default)")
    p.add_argument("--json", action="store_true")
    add_llm_flags(p)


def _f(v) -> str:
    return "-" if v is None else f"{v:.6f}"


async def run(args: argparse.Namespace) -> int:
    from engine.trace.errors import TraceError
    from engine.trace.tune import load_target, tune

    if not args.db.exists():
        raise TraceError(f"no database at {args.db}; pass --db PATH")
    if args.trials < 1:
        raise TraceError("--trials must be at least 1")
    rank = None
    if args.rank or args.llm or args.llm_url or args.model:
        rank = Choice(url=args.llm_url, model=args.model, sim=args.llm == "sim", api_key_env=args.api_key_env)
    target = await load_target(args.db, args.run_id, args.candidate)
    if args.add:
        from engine.trace.tune_add import check_addable

        await check_addable(args.db, args.run_id, args.candidate)  # refused before any evaluation
    res = await tune(target, trials=args.trials, seed=args.seed, rank=rank)
    added = None
    if args.add:
        from engine.trace.tune_add import add_tuned

        added = await add_tuned(args.db, res)
    res["added"] = added
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "tuned_program"}, default=str))
        return 0
    how = res["chosen"]
    print(f"tune {res['candidate_id']} of run {res['run_id']} ({res['task']}): {len(res['knobs'])} knobs "
          f"({how['ranked_by']}{', ' + str(how['model']) if how.get('model') else ''}; {how['candidates']} literals found), "
          f"{res['trials']} trials ({res['startup_trials']} random + {res['trials'] - res['startup_trials']} TPE, "
          f"seed {res['seed']}), {res['failed_trials']} failed")
    print(f"{'knob':16} {'line':>4} {'evolved':>10} {'range':>24} {'tuned':>12}")
    for k in res["knobs"]:
        rng = f"{k['low']:.4g}..{k['high']:.4g} {k['scale'][:3]}"
        print(f"{k['name'][:16]:16} {k['line']:>4} {k['default']:>10.6g} {rng:>24} {k['tuned']:>12.6g}")
    print(f"evolved score  {_f(res['evolved_score'])}  (rewrite check {_f(res['rewrite_check'])}"
          f"{'' if res['rewrite_ok'] else ', DIFFERS: the PARAMS rewrite changed the score'})")
    print(f"tuned ceiling  {_f(res['tuned_ceiling'])}  (trial {res['best_trial']}, 0 = the evolved values; "
          f"gain {_f(res['gain'])}); best searched trial {_f(res['best_trial_score'])}; run's best {_f(res['run_best'])}")
    if added:
        print(f"added {added['artifact_id']} to run {res['run_id']} (operator tune, parent {res['candidate_id']}); "
              f"pool version {added['pool_version']}, best {added['best']}")
    return 0
