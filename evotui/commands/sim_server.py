"""`evotui sim-server`: the simulated backend over real HTTP on loopback (uvicorn).

It answers every built-in task's request layout (all their plug-ins, recognised by content).
"""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from engine.config import ConfigError, SimConfig, format_validation_error, read_toml
from evotui.peers.lifeline import exit_with_parent


def sim_config(args: argparse.Namespace) -> SimConfig:
    """The served [sim] settings: --config FILE's [sim] table (a profile `evotui sim-calibrate`
    wrote, or any run config), under --profile, --time-scale and --seed. ConfigError: one line."""
    fields: dict = {}
    if args.config is not None:
        table = read_toml(args.config).get("sim")
        if not isinstance(table, dict):
            raise ConfigError(f"{args.config}: no [sim] table; give a profile `evotui sim-calibrate` wrote")
        fields.update(table)
    fields.update({k: v for k, v in (("profile", args.profile), ("time_scale", args.time_scale),
                                      ("seed", args.seed)) if v is not None})
    try:
        return SimConfig(**fields)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, f"{args.config or 'sim-server'} [sim]")) from None


def replay_book(dbs: list):
    """The recorded replies of the runs in `dbs` (--answers-from), as a ReplayBook. ConfigError:
    a database that cannot be read or kept no texts."""
    from engine.llm.sim.replay import Recorded, ReplayBook
    from engine.store.errors import StoreError
    from engine.store.texts import recorded_replies

    calls = []
    for db in dbs:
        try:
            got = recorded_replies(db)
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
        if not got:
            raise ConfigError(f"{db}: no LLM call with its texts kept to replay (record with [store] keep_llm_text = true)")
        calls += [(messages, Recorded(*reply)) for messages, *reply in got]
    return ReplayBook(calls)


def main(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.llm.sim.app import create_sim_app
    from engine.tasks.sim_behaviours import all_behaviours

    try:
        cfg = sim_config(args)
        replay = replay_book(args.answers_from) if args.answers_from else None
    except ConfigError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
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
        f"seed {cfg.seed}) at http://{args.host}:{args.port}/v1 -- "
        + (f"latencies are simulated; {len(replay)} recorded replies are served to the requests they answered"
           if replay is not None else "answers and latencies are simulated"),
        file=sys.stderr,
        flush=True,
    )
    app = create_sim_app(cfg, clock, behaviours=all_behaviours(), replay=replay)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid, "evotui sim-server")
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    except OSError as exc:
        print(f"evotui: error: cannot listen on {args.host}:{args.port} ({exc}); choose another --port", file=sys.stderr)
        return 2
    return 0
