"""`evotui bench`: the same task, budget and seeds under each mode, side by side in one run.

Every run gets a fresh simulated backend with identical settings (profile, time scale, seed),
so the only difference between rows is the execution mode. Throughput is proposals per
*simulated* minute of pipeline time; figures are medians over seeds with min-max spread.
`--zero-latency` instead measures the engine itself: a backend that answers instantly, SQLite
on, reporting LLM calls and proposals per wall second. `--strategies a,b,c` instead compares
search strategies under sync and async (bench_strategies.py). `--peers gepa,gepa-pxn,openevolve`
adds the real libraries as rows (bench_peers.py), interleaved with evotui's modes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Awaitable, Callable

from engine.config import SimConfig
from engine.pipeline.modes import mode_named
from engine.run.runner import EngineRun, SetupError
from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError
from evotui.bench import peers as bench_peers
from evotui.bench import quality as bench_quality
from evotui.bench import report
from evotui import scratch
from evotui.bench.modes import DEFAULT_MODES, MODES
from evotui import peers as peers_mod
from evotui.peers import sim_endpoint
from evotui.peers.sim_endpoint import SimEndpoint, SimEndpointError

ZERO_LATENCY_SCALE = 1e9


async def run_one(task: str, mode: str, seed: int, profile: str, proposals: int, time_scale: float | None,
                  db: Path, extra: dict | None = None, program_heldout: bool = False,
                  sim_clock: Callable[[], Awaitable[float]] | None = None) -> dict:
    """One run of `task` under `mode`; program_heldout: a program task's final best is also scored
    by the task's held-out evaluator (the suite's `held`; plain bench rows leave it empty).
    sim_clock: the simulated seconds of the backend the run talks to (a sim-server's clock): the
    pipeline time is then read from it (`pipeline_sim_s`), not from the wall clock."""
    sim: dict = {"profile": profile, "seed": seed}
    if time_scale is not None:
        sim["time_scale"] = time_scale
    layer = {"seed": seed, "sim": sim, "budget": {"max_proposals": proposals}, **MODES[mode]}
    if mode == "async-max":  # the client may use every slot the simulated backend has
        sim_defaults = SimConfig()
        capacity = sim_defaults.vllm_max_num_seqs if profile == "vllm" else sim_defaults.api_max_concurrency
        layer["task_llm"] = {"max_concurrency": capacity}
        if load_any_task(task).kind == "program":  # no rollout stage to give workers (refused since 641e536)
            workers = {k: v for k, v in layer["pipeline"]["workers"].items() if k != "rollout"}
            layer["pipeline"] = {**layer["pipeline"], "workers": workers}
    layers = [("bench", layer)] + ([("bench overrides", extra)] if extra else [])
    run = await EngineRun.create(task, layers, db)
    window: list[float] = []
    if sim_clock is not None:  # the pipeline (after the seed's evaluation) timed on the backend's clock
        pipeline = run.orchestrator.run

        async def timed(*args, **kwargs):
            window.append(await sim_clock())
            try:
                return await pipeline(*args, **kwargs)
            finally:
                window.append(await sim_clock())

        run.orchestrator.run = timed
    result = await run.run()
    s = result.summary
    program = run.ctx.task.kind == "program"
    state = run.sim_state
    ctx = run.ctx
    best = ctx.pool.best()
    held = await bench_quality.heldout_score(ctx.task, best.text, seed) if best is not None else None
    if program and program_heldout and best is not None:
        held = await bench_quality.program_heldout_score(ctx.task, best.text)
    checks = sum(v for k, v in ctx.staleness_counts.items() if not k.startswith("reflect_"))
    patched = ctx.staleness_counts.get("reflect_patch", 0)
    return {
        "mode": mode,
        "settings": settings(run.ctx.config.pipeline),
        "seed": seed,
        "status": result.status,
        "proposals": s["proposals"],
        "proposal_attempts": s["proposal_attempts"],
        # Attempts (a proposal whose edit changed nothing included), as the peers count their
        # reflection calls: the same unit on both sides of a ratio.
        "proposals_per_min": s["proposal_attempts"] / s["pipeline_minutes"] if s["pipeline_minutes"] else 0.0,
        "pipeline_minutes": s["pipeline_minutes"],
        "best_score": s["best_score"],
        "heldout_score": held,
        "seed_score": s["seed_score"],
        "accepted": s["accepted"],
        # Program tasks: proposals the evaluator ran on, whatever it said (the seed's run not
        # counted), as the peers' rows count every evaluation they log, failed ones included.
        # A child turned away before the evaluator (a duplicate, a syntax error, one that
        # cannot join a newer chain head) is not counted.
        "evaluated": s["metric_calls"] - 1 if program else s["proposals"],
        "merges": s["merges_accepted"],
        "llm_calls": s["llm_calls"],
        "prompt_tokens": s["prompt_tokens"],
        "tokens_generated": s["completion_tokens"],
        "tokens_wasted": s["wasted_tokens"],
        "discarded_pct": 100.0 * s["discarded_stale"] / checks if checks else 0.0,
        "patched_pct": 100.0 * patched / checks if checks else 0.0,
        "gap_p50": report.percentile(dict(ctx.gap_histogram), 0.5),
        "gap_p95": report.percentile(dict(ctx.gap_histogram), 0.95),
        # The definition: mean running requests / capacity (vllm max_num_seqs, api cap).
        "utilization": state.utilization() if state is not None else None,
        "throughput_utilization": state.throughput_utilization() if state is not None else None,
        "preemptions": state.server.kv_figures().get("preemptions") if state is not None else None,
        "wall_s": s["wall_s"],
        "pipeline_wall_s": run.pipeline_s,
        "pipeline_sim_s": window[1] - window[0] if len(window) == 2 else None,
        "best_history": [list(p) for p in ctx.best_history],
        "speculative": {"inserted": ctx.tally.speculative_inserted, "confirmed": ctx.tally.speculative_confirmed,
                        "removed": ctx.tally.speculative_removed},
    }


async def run_over_loopback(task: str, mode: str, seed: int, profile: str, proposals: int, time_scale: float | None,
                            db: Path, extra: dict | None = None, program_heldout: bool = False,
                            sim_config: Path | None = None, answers_from: list[Path] | None = None) -> dict:
    """run_one with every LLM call over HTTP to a fresh `evotui sim-server`, as the peer rows reach
    theirs (equal transport), its pipeline timed by that server's clock (virtual by default:
    sim_endpoint.DEFAULT_CLOCK), as the peers' are. sim_config: the server serves that file's
    [sim] table (a calibrated profile) instead of `profile`'s defaults; answers_from: run databases
    whose recorded replies it serves to the requests they answered (sim-calibrate --check)."""
    scale = time_scale if time_scale is not None else SimConfig().time_scale
    endpoint = await asyncio.to_thread(SimEndpoint(profile, seed, scale, config=sim_config,
                                                         answers_from=answers_from).__enter__)
    try:
        got = await run_one(task, mode, seed, profile, proposals, time_scale, db,
                            {**(extra or {}), "task_llm": {"url": endpoint.url}}, program_heldout,
                            sim_clock=lambda: asyncio.to_thread(endpoint.sim_now))
        served = await asyncio.to_thread(endpoint.metrics)
    finally:
        await asyncio.to_thread(endpoint.__exit__, None, None, None)
    minutes = got["pipeline_sim_s"] / 60.0
    got.update(pipeline_minutes=minutes, proposals_per_min=got["proposal_attempts"] / minutes if minutes > 0 else 0.0,
               clock=served.get("clock", "wall"), utilization=served["utilization"],
               throughput_utilization=served["throughput_utilization"], preemptions=served.get("preemptions"),
               replay_matched=served.get("replay_matched"), replay_missed=served.get("replay_missed"))
    return got


def settings(p) -> str:
    """A mode's resolved scheduler settings, as the bench states them beside its figures (what
    applies read from the mode table, engine/pipeline/modes.py)."""
    mode = mode_named(p.mode)
    parts = [f"mode={p.mode}", f"minibatch={p.minibatch_size}", f"merge={'on' if p.merge else 'off'}"]
    if mode.streams:
        parts += [f"policy={p.policy}" + (f"(max_gap={p.max_gap})" if p.max_gap is not None else ""),
                  f"max_in_flight={p.max_in_flight}", f"speculation={'on' if p.speculation else 'off'}",
                  f"adaptive={'on' if p.adaptive else 'off'}",
                  "workers=" + "/".join(f"{k}:{v}" for k, v in sorted(p.workers.items()))]
    elif mode.lockstep:
        parts.append(f"P={p.pxn_parents} x N={p.pxn_mutations}")
    elif mode.chains:
        count = f"chains={p.chains}" if p.chain_floor == p.chains else \
            f"chains={p.chain_floor}..{p.chains} (grow after {p.chain_grow_after} clean steps)"
        parts += [count, f"chain_validators={p.chain_validators}"]
        parts += [f"chain_early_gate={'on' if p.chain_early_gate else 'off'}",
                  f"chain_gate_current_head={'on' if p.chain_gate_current_head else 'off'}"]
        parts += [f"chain_validation_width={p.chain_validation_width}"] if p.chain_validation_width else []
        parts += ["speculation=on"] if p.speculation else []  # program tasks with a cascade
    return " ".join(parts)


async def zero_latency(task: str, proposals: int, db_dir: Path) -> dict:
    """Engine overhead: instant backend, SQLite on, enough items in flight to saturate the CPU."""
    extra = {"pipeline": {"max_in_flight": 32, "queue_capacity": 64}}
    row = await run_one(task, "async", 0, "vllm", proposals, ZERO_LATENCY_SCALE, db_dir / "zero.db", extra)
    wall = row["pipeline_wall_s"] or row["wall_s"]
    return {"mode": "async-zero-latency", "llm_calls": row["llm_calls"], "proposals": row["proposals"],
            "pipeline_wall_s": round(wall, 3), "llm_calls_per_s": round(row["llm_calls"] / wall, 1),
            "proposals_per_s": round(row["proposals"] / wall, 2)}


def _parse_modes(spec: str, reference: bool = True) -> list[str]:
    """The modes named in spec; with reference, sync first if missing (the ratios' base; with
    --peers the base is real GEPA instead)."""
    modes = [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if reference and "sync" not in modes:
        modes.insert(0, "sync")
    return modes


def _progress(args: argparse.Namespace, row: dict) -> None:
    if not args.json:
        print(f"  {row['mode']:17} seed {row['seed']}: {row['proposals_per_min']:.2f} proposals/min, "
              f"best {row['best_score']:.3f}", file=sys.stderr, flush=True)


def _peers(args: argparse.Namespace) -> list[peers_mod.Peer]:
    """The real peers asked for with --peers, installed ones only (a one-line notice for the others)."""
    if not getattr(args, "peers", None):
        return []
    chosen = peers_mod.parse(args.peers, load_any_task(args.task).kind)
    for p in chosen:
        if not peers_mod.installed(p):
            print(f"evotui: note: peer row {p.name} skipped: {p.package} is not installed ({p.install})",
                  file=sys.stderr)
    return [p for p in chosen if peers_mod.installed(p)]


def main(args: argparse.Namespace) -> int:
    from evotui.bench import real as bench_real

    sim_endpoint.DEFAULT_CLOCK = getattr(args, "sim_clock", "virtual")  # every row's sim-server, peers' too
    if bench_real.wanted(args):  # --llm-url URL / --llm local: a real server, wall-clock throughput
        return bench_real.main(args)
    if getattr(args, "suite", None):  # a declared suite of tasks x rows (bench_suite.py)
        from evotui.bench import suite as bench_suite

        return bench_suite.main(args)
    if getattr(args, "strategies", None):  # strategies side by side (bench_strategies.py)
        from evotui.bench import strategies as bench_strategies

        return bench_strategies.main(args)
    try:
        modes = _parse_modes(args.modes or DEFAULT_MODES, reference=not getattr(args, "peers", None))
    except ValueError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.proposals < 1:
        print("evotui: error: --seeds and --proposals must be at least 1", file=sys.stderr)
        return 2
    try:
        peers = _peers(args)
    except (ValueError, TaskError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    time_scale = args.time_scale if args.time_scale is not None else SimConfig().time_scale

    async def go() -> dict[str, list[dict]]:
        results: dict[str, list[dict]] = {m: [] for m in [*modes, *(p.name for p in peers)]}
        with scratch.directory("evotui-bench-") as tmp:
            if args.zero_latency:
                results = {"zero": [await zero_latency(args.task, args.proposals, Path(tmp))]}
                return results
            for seed in range(args.seeds):
                for mode in modes:  # interleaved, so machine drift hits every mode alike
                    row = await run_over_loopback(args.task, mode, seed, args.profile, args.proposals,
                                                  args.time_scale, Path(tmp) / f"{mode}-{seed}.db")
                    results[mode].append(row)
                    _progress(args, row)
                for peer in peers:  # the real libraries, each against a fresh backend on loopback
                    try:
                        row = await asyncio.to_thread(bench_peers.run_peer, peer, args.task, seed, args.profile,
                                                      args.proposals, time_scale)
                    except (bench_peers.PeerFailed, SimEndpointError) as exc:
                        print(f"evotui: warning: peer row failed: {exc}", file=sys.stderr, flush=True)
                        continue
                    results[peer.name].append(row)
                    _progress(args, row)
        return {m: rows for m, rows in results.items() if rows}

    try:
        results = asyncio.run(go())
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.zero_latency:
        row = results["zero"][0]
        print(json.dumps(row) if args.json else
              f"engine overhead (zero-latency simulated backend, SQLite on): {row['llm_calls_per_s']} LLM calls/s, "
              f"{row['proposals_per_s']} proposals/s over {row['pipeline_wall_s']} s ({row['llm_calls']} calls)")
        return 0
    report.add_equal_time_scores(results)
    rows = report.summarise(results, args.profile, simulated=True)
    report.emit(rows, args.out, args.json, lambda r: report.table(r, args.proposals, "simulated"))
    if not args.json:
        print()
        print(report.plot(results))
    return 0
