"""`evotui bench-ui`: what the TUI costs. The same run (task, budget, seed, simulated backend at
the same time scale) is driven headless (the --no-ui path) and under the TUI (Textual's headless
driver, which renders every frame but writes it nowhere) alternately; throughput is proposals per
simulated minute of pipeline time, median over repeats. Target: TUI/headless >= 0.95.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from engine.runner import EngineRun, SetupError
from evotui.control import ControlServer, socket_path
from evotui.headless import drive


def _layer(proposals: int, time_scale: float, seed: int) -> list[tuple[str, dict]]:
    return [("bench-ui", {"seed": seed, "sim": {"time_scale": time_scale, "seed": seed},
                          "budget": {"max_proposals": proposals}})]


async def headless_once(task: str, layer, db: Path) -> dict:
    run = await EngineRun.create(task, layer, db)
    result = await drive(run, events_path=None, progress_every=2.0, quiet=True)
    return result.summary


async def tui_once(task: str, layer, db: Path, size: tuple[int, int]) -> dict:
    from evotui.tui.app import EvoApp
    from evotui.tui.backend import LiveBackend
    from evotui.tui.launch import prepare

    run = await EngineRun.create(task, layer, db)
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    await control.start()
    app = EvoApp(LiveBackend(run), engine=run.run)
    app._theme_name = prepare(app, None, [])
    try:
        async with app.run_test(size=size) as pilot:
            while app.engine_task is None or not app.engine_task.done():
                await pilot.pause(0.05)
            ticks = app.sampler.ticks
    finally:
        await control.close()
    summary = app.engine_task.result().summary
    summary["ui_ticks"] = ticks
    return summary


async def bench(args: argparse.Namespace) -> dict:
    w, _, h = args.size.partition("x")
    size = (int(w), int(h))
    rows: dict[str, list[dict]] = {"headless": [], "tui": []}
    with tempfile.TemporaryDirectory(prefix="evotui-bench-ui-") as tmp:
        for i in range(args.repeats):
            layer = _layer(args.proposals, args.time_scale, seed=i)
            order = ("headless", "tui") if i % 2 == 0 else ("tui", "headless")
            for kind in order:
                db = Path(tmp) / f"{kind}-{i}.db"
                if kind == "headless":
                    rows[kind].append(await headless_once(args.task, layer, db))
                else:
                    rows[kind].append(await tui_once(args.task, layer, db, size))
    out: dict = {"task": args.task, "proposals": args.proposals, "time_scale": args.time_scale,
                 "repeats": args.repeats, "size": args.size}
    for kind, summaries in rows.items():
        rates = [s["proposals_per_min"] or 0.0 for s in summaries]
        out[kind] = {"proposals_per_sim_min": round(statistics.median(rates), 3), "runs": [round(r, 3) for r in rates],
                     "wall_s": round(statistics.median(s["wall_s"] for s in summaries), 2)}
        if kind == "tui":
            out[kind]["ui_ticks"] = [s["ui_ticks"] for s in summaries]
    base = out["headless"]["proposals_per_sim_min"]
    out["ratio_tui_over_headless"] = round(out["tui"]["proposals_per_sim_min"] / base, 4) if base else None
    return out


def main(args: argparse.Namespace) -> int:
    try:
        out = asyncio.run(bench(args))
    except SetupError as exc:
        print(f"evotui: error: {exc}")
        return exc.exit_code
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"bench-ui: {out['task']}, {out['proposals']} proposals, time scale x{out['time_scale']:g}, "
          f"{out['repeats']} repeats, TUI at {out['size']} (simulated backend)")
    for kind in ("headless", "tui"):
        r = out[kind]
        print(f"  {kind:<9} {r['proposals_per_sim_min']:8.3f} proposals/sim-min (runs {r['runs']}, median wall {r['wall_s']}s)")
    ratio = out["ratio_tui_over_headless"]
    verdict = "within" if ratio is not None and ratio >= 0.95 else "OVER"
    print(f"  ratio tui/headless = {ratio} ({verdict} the 5% budget)")
    return 0
