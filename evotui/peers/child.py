"""One peer run in a process of its own: `python -m evotui.peers.child PEER TASK --url URL ...`.

Prints one JSON object (the run's figures) on stdout; a failure prints a one-line reason on
stderr and exits 1, so the bench reports the row as failed instead of losing the others.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import httpx

from engine.tasks.loader import load_any_task
from evotui import scratch
from evotui.peers import lifeline


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m evotui.peers.child")
    p.add_argument("peer", choices=["gepa", "gepa-pxn", "gepa-pxn-best", "openevolve", "shinka"])
    p.add_argument("task")
    p.add_argument("--url", required=True, help="the simulated backend, http://127.0.0.1:PORT/v1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--proposals", type=int, required=True)
    p.add_argument("--time-scale", type=float, required=True)
    lifeline.add_argument(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    scratch.remove_on_sigterm()
    if args.parent_pid is not None:
        lifeline.exit_with_parent(args.parent_pid, f"peer run {args.peer}")
    try:
        row = _run(args)
    except Exception as exc:  # noqa: BLE001 - reported as the row's failure, never swallowed
        print(f"{args.peer} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(row))
    return 0


def _run(args: argparse.Namespace) -> dict:
    logging.basicConfig(level=logging.WARNING)  # the peers log every iteration at INFO
    task = load_any_task(args.task)

    def sim_clock() -> float:
        return float(httpx.get(f"{args.url}/sim/metrics", timeout=10.0).json()["sim_now"])

    if args.peer == "shinka":
        from evotui.peers import shinka_peer

        with scratch.directory("evotui-peer-") as tmp:
            return shinka_peer.run(task, args.url, args.seed, args.proposals, sim_clock, Path(tmp))
    if args.peer == "openevolve":
        from evotui.peers import openevolve_peer

        with scratch.directory("evotui-peer-") as tmp:
            row = openevolve_peer.run(task, args.url, args.seed, args.proposals, sim_clock, Path(tmp))
    else:
        from evotui.peers import gepa_peer

        row = gepa_peer.run(task, args.url, args.seed, args.proposals, args.peer.startswith("gepa-pxn"), sim_clock,
                            best_only=args.peer == "gepa-pxn-best")
    return row


if __name__ == "__main__":
    sys.exit(main())
