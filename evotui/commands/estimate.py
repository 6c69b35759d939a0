"""`evotui estimate TASK [run flags]` and `evotui run ... --dry-run`: what the run would cost.

A probe of a few proposals (engine/costs/estimate.py) on the run's own endpoints, in a scratch database
beside --db that is removed afterwards. On a paid endpoint the probe spends real money, so it runs
only when --probe-proposals is given explicitly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from engine.costs.estimate import PROBE_PROPOSALS

EXIT_NO_PROGRESS = 4


def add_arguments(p: argparse.ArgumentParser, default_db: Path) -> None:
    from evotui import options

    p.add_argument("task", help="task folder, or the name of a built-in task (e.g. rules)")
    options.add_run_flags(p)
    add_flags(p)
    p.add_argument("--db", type=Path, default=default_db, help="the probe's scratch database goes beside it "
                   "(and is removed)")


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--probe-proposals", type=int, metavar="N", help=f"proposals the probe makes (default "
                   f"{PROBE_PROPOSALS}, or two per chain in mode chain; required on a paid endpoint, where the "
                   "probe spends real money)")
    p.add_argument("--json", action="store_true", help="print the estimate as one JSON object")


def main(args: argparse.Namespace) -> int:
    from engine.config import ConfigError
    from engine.costs.estimate import EstimateError, probe
    from engine.run.runner import EngineRun, SetupError
    from evotui import options

    n = getattr(args, "probe_proposals", None)  # `run --dry-run` has neither flag
    if n is not None and n < 1:
        print("evotui: error: --probe-proposals must be at least 1", file=sys.stderr)
        return 2

    async def open_run(layers: list, db: Path):
        run = await EngineRun.create(args.task, layers, db)
        if not run.ctx.config.uses_sim and n is None:
            await run.close()
            raise SetupError(f"the probe would make real calls to {run.ctx.backend}, which may cost money: pass "
                             f"--probe-proposals N to accept that (N={PROBE_PROPOSALS} is the default on the simulated backend)")
        return run

    try:
        layers = options.config_layers(args)
        db_dir = Path(args.db).expanduser().resolve().parent
        if not db_dir.is_dir():
            raise ConfigError(f"--db {args.db}: the folder {db_dir} does not exist")
        est = asyncio.run(probe(open_run, layers, db_dir, n))
    except (SetupError, ConfigError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except EstimateError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return EXIT_NO_PROGRESS
    if getattr(args, "json", False):
        print(json.dumps(est.as_dict()))
    else:
        print("\n".join(est.lines()))
    return 0
