"""`evotui replay`: the front end of engine/trace/replay.py."""

from __future__ import annotations

import argparse
import json

from engine.trace.llm import Choice
from engine.trace.replay import replay
from evotui.commands.trace_db import open_db


def _f(v) -> str:
    return "-" if v is None else f"{v:.4f}"


async def run(args: argparse.Namespace) -> int:
    store = await open_db(args.db, readonly=True)
    try:
        choice = Choice(url=args.llm_url, model=args.model, sim=args.llm == "sim", api_key_env=args.api_key_env)
        res = await replay(store, args.run_id, args.candidate, args.n, variant=args.variant, choice=choice)
    finally:
        await store.close()
    if args.json:
        print(json.dumps(res, default=str))
        return 0
    print(f"replay of {res['candidate_id']} (parent {res['parent_id']}), {res['variant']} prompt, {res['n']} "
          f"replies from {res['model']}; recorded score {_f(res['recorded_score'])}, parent {_f(res['parent_score'])}")
    strict = "mean_edit_overlap" in res
    overlap_head = f" {'overlap':>7}" if strict else ""
    print(f"{'reply':>5} {'parse':>5} {'eval':>5} {'score':>8} {'exact':>5}{overlap_head} {'class':>8}  error")
    for r in res["replies"]:
        overlap = f" {_f(r.get('edit_overlap')):>7}" if strict else ""
        print(f"{r['reply']:>5} {'yes' if r['parsed'] else 'no':>5} {'yes' if r['evaluated'] else 'no':>5} "
              f"{_f(r['score']):>8} {'yes' if r.get('exact') else 'no':>5}{overlap} {r.get('class') or '-':>8}  "
              f"{(r['error'] or '')[:60]}")
    c = res["classes"]
    print(f"parse {res['parse_rate']:.2f}, evaluation {res['eval_rate']:.2f}, exact match {res['exact_match_rate']:.2f}, "
          f"mean score {_f(res['mean_score'])}, replay/original {_f(res['replay_to_original'])}"
          + (f", mean edit overlap {_f(res['mean_edit_overlap'])}" if strict else "")
          + f"; better {c['better']}, similar {c['similar']}, worse {c['worse']}")
    return 0
