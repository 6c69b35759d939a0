"""`evotui sim-server`: the simulated backend over real HTTP on loopback (uvicorn).

It answers every built-in task's request layout (all their plug-ins, recognised by content).
"""

from __future__ import annotations

import argparse
import sys

from engine.config import SimConfig
from evotui.peers.lifeline import exit_with_parent


def main(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.llm.sim.app import create_sim_app
    from engine.tasks.sim_behaviours import all_behaviours

    fields = {"profile": args.profile, "seed": args.seed}
    if args.time_scale is not None:
        fields["time_scale"] = args.time_scale
    cfg = SimConfig(**fields)
    clock = None
    if args.clock == "virtual":
        from engine.llm.sim.client_watch import ClientWatch, ClientWatchError
        from engine.llm.sim.virtual_clock import VirtualClock

        watched = args.watch_pid if args.watch_pid is not None else args.parent_pid
        if watched is None:
            print("evotui: error: --clock virtual needs the client's process: give --watch-pid PID", file=sys.stderr)
            return 2
        try:
            clock = VirtualClock(cfg.time_scale, ClientWatch(watched, port=args.port))
        except ClientWatchError as exc:
            print(f"evotui: error: {exc}", file=sys.stderr)
            return 2
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"evotui: note: serving the simulator on {args.host}, not loopback", file=sys.stderr)
    print(
        f"evotui sim-server: SIMULATED OpenAI-compatible backend (profile {cfg.profile}, {args.clock} clock, "
        f"time scale x{cfg.time_scale:g}, "
        f"seed {cfg.seed}) at http://{args.host}:{args.port}/v1 -- answers and latencies are simulated",
        file=sys.stderr,
        flush=True,
    )
    app = create_sim_app(cfg, clock, behaviours=all_behaviours())
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid, "evotui sim-server")
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    except OSError as exc:
        print(f"evotui: error: cannot listen on {args.host}:{args.port} ({exc}); choose another --port", file=sys.stderr)
        return 2
    return 0
