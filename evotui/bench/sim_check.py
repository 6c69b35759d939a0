"""`evotui sim-calibrate --check MODES`: the same small bench on the real server and on the
profile just calibrated from it, and the mode-to-mode throughput ratios of both side by side.

Throughput is proposal attempts per minute of pipeline time: wall minutes on the real server,
simulated minutes on the profile. The profile's output lengths are fitted per stage from the
calls the real runs recorded (unless --lengths-from gave them), so both sides see this model's
lengths on this task; what is checked is the serving model (batching, prefill, slots), by the
ratios it predicts between modes. Answer quality is not checked: the simulator's answers are
its own, and a small real model's are mostly unusable (usable proposals are shown beside).
Runs are interleaved per seed (mode after mode) so that load drift hits every mode alike.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

from engine.llm.sim import calibrate_fit as fitting
from evotui import scratch
from evotui.bench import run as bench

AGREEMENT = 0.20
"""Ratios agree when the simulated ratio is within 20% of the real one (issue 34)."""
TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"


def cut_task(task: str, examples: int, into: Path) -> str:
    """A copy of a built-in prompt task with its splits cut (train to `examples`, the others to
    half), so a real CPU server finishes the check in minutes; the task unchanged otherwise."""
    src = Path(task) if Path(task).is_dir() else TASKS_DIR / task
    if examples <= 0 or not src.is_dir():
        return task
    dst = into / f"{src.name}-cut"
    shutil.copytree(src, dst)
    for split, n in (("train.jsonl", examples), ("val.jsonl", max(2, examples // 2)),
                     ("heldout.jsonl", max(2, examples // 2))):
        f = dst / split
        if f.is_file():
            f.write_text("\n".join(f.read_text().splitlines()[:n]) + "\n")
    return str(dst)


def per_minute(row: dict, real: bool) -> float:
    minutes = row["pipeline_wall_s"] / 60.0 if real else row["pipeline_minutes"]
    return row["proposal_attempts"] / minutes if minutes > 0 else 0.0


async def run(args: argparse.Namespace, url: str, model: str, fit: fitting.Fit, settings: str, log) -> int:
    from evotui.commands.sim_calibrate import recorded_lengths

    modes: list[str] = args.check_modes
    endpoint = {"url": url, "model": model, "max_tokens": args.llm_max_tokens, "max_concurrency": fit.max_num_seqs}
    if args.api_key_env:
        endpoint["api_key_env"] = args.api_key_env
    real: dict[str, list[float]] = {m: [] for m in modes}
    sim: dict[str, list[float]] = {m: [] for m in modes}
    usable: dict[str, int] = {m: 0 for m in modes}
    replayed: dict[str, list[int]] = {m: [0, 0] for m in modes}  # [matched, requests], summed over seeds
    with scratch.directory("evotui-sim-check-") as tmp:
        task = cut_task(args.task, args.task_examples, Path(tmp))
        dbs = []
        for seed in range(args.seeds):
            for mode in modes:
                db = Path(tmp) / f"real-{mode}-{seed}.db"
                row = await bench.run_one(task, mode, seed, "vllm", args.proposals, None, db, {"task_llm": endpoint})
                dbs.append(db)
                real[mode].append(per_minute(row, real=True))
                usable[mode] += row["proposals"]
                log(f"  real {mode:8} seed {seed}: {row['proposal_attempts']} attempts in "
                    f"{row['pipeline_wall_s']:.1f}s = {real[mode][-1]:.2f}/min, {row['llm_calls']} calls")
        if not args.lengths_from:
            fit.lengths = fitting.fit_stage_lengths(recorded_lengths(dbs), args.llm_max_tokens)
            args.out.write_text(_with_lengths(args.out.read_text(), fit))
            log(f"  output lengths per stage from the real runs' {len(dbs)} databases written to {args.out}")
        # Over loopback to a sim-server serving the written profile, on its virtual clock: the
        # client's own CPU time counts once, as it does in the real runs' wall time (in process,
        # the wall clock x time scale multiplied it). The server answers with the real run's
        # replies (same mode and seed, matched by request): the small real model's proposals are
        # mostly unusable, the simulator's are not, and with its own answers the simulated run did
        # other work (rules, 6 proposals: 62-94 calls against the real runs' 28).
        sim_layer = {"task_llm": {"max_tokens": args.llm_max_tokens, "max_concurrency": fit.max_num_seqs}}
        for seed in range(args.seeds):
            for mode in modes:
                row = await bench.run_over_loopback(task, mode, seed, "vllm", args.proposals, args.time_scale,
                                                    Path(tmp) / f"sim-{mode}-{seed}.db", sim_layer,
                                                    sim_config=args.out,
                                                    answers_from=[Path(tmp) / f"real-{mode}-{seed}.db"])
                sim[mode].append(per_minute(row, real=False))
                matched, missed = row.get("replay_matched") or 0, row.get("replay_missed") or 0
                replayed[mode][0] += matched
                replayed[mode][1] += matched + missed
                log(f"  sim  {mode:8} seed {seed}: {row['proposal_attempts']} attempts in "
                    f"{row['pipeline_minutes']:.2f} simulated min = {sim[mode][-1]:.2f}/min, {row['llm_calls']} calls "
                    f"({matched} of {matched + missed} answered with the real run's reply)")
    rows = compare(modes, real, sim)
    print(f"server: {settings}; task {args.task} cut to {args.task_examples or 'all'} examples, {args.proposals} "
          f"proposals, {args.seeds} seed(s), max_tokens {args.llm_max_tokens}")
    print(table(rows, usable, replayed))
    agree = all(r["agrees"] for r in rows)
    print(f"mode-to-mode throughput ratios {'agree' if agree else 'do NOT agree'} within {AGREEMENT:.0%} "
          f"(real: wall minutes; simulated: simulated minutes of the calibrated profile)")
    return 0


def _with_lengths(text: str, fit: fitting.Fit) -> str:
    """The written profile with its [sim.lengths.*] tables replaced by fit.lengths."""
    head = text.split("\n[sim.lengths.", 1)[0].rstrip("\n")
    lines = [head]
    for stage, d in sorted(fit.lengths.items()):
        lines += ["", f"[sim.lengths.{stage}]"] + [f"{k} = {fitting._toml_value(v)}" for k, v in d.items()]
    return "\n".join(lines) + "\n"


def compare(modes: list[str], real: dict[str, list[float]], sim: dict[str, list[float]]) -> list[dict]:
    """Per mode: median throughput real and simulated, each as a ratio to the first mode's, and
    whether the simulated ratio is within AGREEMENT of the real one."""
    base = modes[0]
    r0, s0 = statistics.median(real[base]), statistics.median(sim[base])
    rows = []
    for m in modes:
        r, s = statistics.median(real[m]), statistics.median(sim[m])
        rr = r / r0 if r0 > 0 else float("nan")
        sr = s / s0 if s0 > 0 else float("nan")
        off = sr / rr - 1.0 if rr > 0 else float("nan")
        rows.append({"mode": m, "real": r, "real_ratio": rr, "sim": s, "sim_ratio": sr, "off": off,
                     "agrees": abs(off) <= AGREEMENT})
    return rows


def table(rows: list[dict], usable: dict[str, int], replayed: dict[str, list[int]] | None = None) -> str:
    """replayed: per mode [requests answered with the real run's reply, requests] on the simulated side."""
    out = [f"{'mode':10} {'real/min':>9} {'real ratio':>10} | {'sim/min':>9} {'sim ratio':>9} | {'sim vs real':>11}"
           f" {'usable (real)':>13} {'real replies (sim)':>18}"]
    for r in rows:
        got, asked = (replayed or {}).get(r["mode"], [0, 0])
        share = f"{got / asked:.0%} of {asked}" if asked else "-"
        out.append(f"{r['mode']:10} {r['real']:9.2f} {r['real_ratio']:10.2f} | {r['sim']:9.2f} {r['sim_ratio']:9.2f} | "
                   f"{r['off']:+10.0%}{'' if r['agrees'] else '!'} {usable[r['mode']]:13d} {share:>18}")
    return "\n".join(out)
