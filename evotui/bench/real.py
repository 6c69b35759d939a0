"""`evotui bench --llm-url URL` / `--llm local`: sync vs async proposals per *wall* minute on a
real OpenAI-compatible server (vLLM, SGLang, llama.cpp, an API).

With --llm local one managed llama.cpp server is started for the whole bench and every run
talks to it, so start-up is not part of any run's time. Runs are interleaved per seed (sync,
async, sync, async, ...) so that load drift on the machine hits every mode alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from engine.llm.redact import redact_url

# The engine (runner, local server) and the bench are imported where a bench runs: the CLI builds
# every command's flags (add_flags) on each start, and `evotui show` should not load the engine.

REAL_DEFAULT_MODES = "sync,async"


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("real endpoint (default: the simulated backend)")
    g.add_argument("--llm-url", metavar="URL", help="OpenAI-compatible base URL incl. /v1")
    g.add_argument("--model", metavar="NAME", help="model name at --llm-url (default: local)")
    g.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    g.add_argument("--llm", choices=["local"], help="start a managed llama.cpp server for the bench")
    g.add_argument("--llm-model-path", metavar="FILE.gguf", help="--llm local: serve this GGUF model")
    g.add_argument("--parallel", type=int, default=4, help="--llm local: server slots (default 4)")
    g.add_argument("--llm-max-tokens", type=int, default=256, metavar="N",
                   help="max_tokens per request on a real endpoint (default 256)")
    g.add_argument("--max-in-flight", type=int, default=None, metavar="N", help="async: items in flight")


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "llm_url", None) or getattr(args, "llm", None))


def _endpoint_layer(args: argparse.Namespace, url: str, model: str, slots: int | None) -> dict:
    ep: dict = {"url": url, "model": model, "max_tokens": args.llm_max_tokens}
    if slots is not None:
        ep["max_concurrency"] = slots
    if args.api_key_env:
        ep["api_key_env"] = args.api_key_env
    layer: dict = {"task_llm": ep}
    if args.max_in_flight:
        layer["pipeline"] = {"max_in_flight": args.max_in_flight}
    return layer


async def measure(args: argparse.Namespace, modes: list[str], url: str, model: str, slots: int | None,
                  log=print) -> dict[str, list[dict]]:
    from evotui import scratch
    from evotui.bench import run as bench

    results: dict[str, list[dict]] = {m: [] for m in modes}
    layer = _endpoint_layer(args, url, model, slots)
    with scratch.directory("evotui-bench-real-") as tmp:
        for seed in range(args.seeds):
            for mode in modes:
                row = await bench.run_one(args.task, mode, seed, "vllm", args.proposals, None,
                                          Path(tmp) / f"{mode}-{seed}.db", layer)
                # A small model's proposals are often unusable: throughput counts attempts (each
                # one a full rollout + reflection round trip), usable ones are reported beside it.
                minutes = row["pipeline_wall_s"] / 60.0
                row["usable_proposals"] = row["proposals"]
                row["proposals_per_min"] = row["proposal_attempts"] / minutes if minutes > 0 else 0.0
                results[mode].append(row)
                log(f"  {mode:8} seed {seed}: {row['proposal_attempts']} proposal attempts ({row['usable_proposals']} "
                    f"usable) in {row['pipeline_wall_s']:.1f}s = "
                    f"{row['proposals_per_min']:.2f} proposals/min, {row['llm_calls']} calls, best {row['best_score']:.3f}")
    return results


def main(args: argparse.Namespace) -> int:
    from engine.llm.local import LocalServer, LocalServerError, resolve_model
    from engine.run.runner import SetupError
    from evotui.bench import run as bench
    from evotui.bench import report as bench_report

    if args.llm and args.llm_url:
        print("evotui: error: --llm local and --llm-url exclude each other; pass one of them", file=sys.stderr)
        return 2
    try:
        modes = bench._parse_modes(args.modes or REAL_DEFAULT_MODES)
    except ValueError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    if args.seeds < 1 or args.proposals < 1 or args.parallel < 1 or args.llm_max_tokens < 1:
        print("evotui: error: --seeds, --proposals, --parallel and --llm-max-tokens must be at least 1", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        if not args.json:
            print(line, file=sys.stderr, flush=True)

    async def go() -> tuple[dict[str, list[dict]], str]:
        if not args.llm:
            return await measure(args, modes, args.llm_url, args.model or "local", None, log), redact_url(args.llm_url)
        server = LocalServer(resolve_model(args.llm_model_path), parallel=args.parallel,
                             aliases={args.model or "local"})
        try:
            await server.start()
            log(f"  local llama.cpp server: {server.model.name} at {server.url}, {server.parallel} slots, "
                f"ready in {server.startup_s:.1f}s")
            return (await measure(args, modes, server.url, args.model or "local", server.parallel, log),
                    f"local:{server.model.name}")
        finally:
            server.stop()

    try:
        results, endpoint = asyncio.run(go())
    except (SetupError, LocalServerError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    bench_report.add_equal_time_scores(results)
    rows = bench_report.summarise(results, endpoint, simulated=False)
    for r in rows:
        r["usable_proposals"] = sum(run["usable_proposals"] for run in r["runs"])
        r["proposal_attempts"] = sum(run["proposal_attempts"] for run in r["runs"])
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    if args.json:
        for r in rows:
            print(json.dumps({k: v for k, v in r.items() if k != "runs"} | {"endpoint": endpoint}))
    else:
        print(f"endpoint {endpoint} (real; proposals/min = proposal attempts per wall minute of pipeline time)")
        print(bench_report.table(rows, args.proposals, "wall"))
    return 0
