"""`evotui sim-calibrate`: measure a running OpenAI-compatible server (or a managed llama.cpp
server, --llm local) and write a simulator profile from it (a config file with a `[sim]` table,
`evotui run TASK --config FILE`). With `--check MODES` it then runs the same small bench on the
real server and on the calibrated profile and prints the mode-to-mode throughput ratios of both
side by side (sim_check.py): the check that the simulator's serving model predicts what the
modes gain on that server. It checks throughput only: the simulator's answers are its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when the command runs, not when `evotui --help` builds the parser
    from engine.llm.sim import calibrate_fit as fitting
    from engine.llm.sim.calibrate_probe import Probe

DEFAULT_LEVELS = "1,2,4,8"
SHORT_PROMPT_UNITS = 2  # decode levels: ~40 prompt tokens, so prefill hardly mixes in
PREFILL_UNITS = (4, 40)  # ~80 and ~800 prompt tokens: the slope of TTFT between them


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", metavar="URL", help="OpenAI-compatible base URL incl. /v1")
    p.add_argument("--model", default="local", help="model name at --url (default local)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--llm", choices=["local"], help="start a managed llama.cpp server and measure it")
    p.add_argument("--llm-model-path", metavar="FILE.gguf", help="--llm local: serve this GGUF model")
    p.add_argument("--parallel", type=int, default=4, help="--llm local: server slots (default 4)")
    p.add_argument("--threads", type=int, default=None, help="--llm local: CPU threads (default: all cores)")
    p.add_argument("--ctx", type=int, default=2048, help="--llm local: context tokens per slot (default 2048)")
    p.add_argument("--slots", type=int, default=None, help="the server's parallel sequences (default: "
                   "llama.cpp's /props, else the highest level)")
    p.add_argument("--kv-cache-tokens", type=int, default=None,
                   help="tokens the server's KV cache holds (default: slots x context per slot from /props)")
    p.add_argument("--levels", default=DEFAULT_LEVELS, help=f"concurrency levels (default {DEFAULT_LEVELS})")
    p.add_argument("--requests", type=int, default=2, help="requests per client per level (default 2)")
    p.add_argument("--decode-tokens", type=int, default=64, help="output tokens per probe request (default 64)")
    p.add_argument("--prefill-repeats", type=int, default=3, help="lone requests per prompt size (default 3)")
    p.add_argument("--lengths-from", type=Path, action="append", metavar="DB",
                   help="fit output lengths per stage from the calls a run recorded (repeatable)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.toml", help="where to write the profile")
    g = p.add_argument_group("check (the same bench on the real server and on the profile)")
    g.add_argument("--check", metavar="MODES", help="bench modes to compare, e.g. sync,async,chain")
    g.add_argument("--task", default="rules", help="task of the check (default rules)")
    g.add_argument("--task-examples", type=int, default=8, metavar="N",
                   help="cut the task's train split to N and val/held-out to N/2 (default 8; 0 = all)")
    g.add_argument("--seeds", type=int, default=1, help="seeds per mode (default 1)")
    g.add_argument("--proposals", type=int, default=4, help="proposal budget per run (default 4)")
    g.add_argument("--llm-max-tokens", type=int, default=64, metavar="N", help="max_tokens per request (default 64)")
    g.add_argument("--time-scale", type=float, default=4.0, help="simulated runs: simulated seconds per wall second")


def _bad(msg: str) -> int:
    print(f"evotui: error: {msg}", file=sys.stderr)
    return 2


def _validate(args: argparse.Namespace) -> str | None:
    if bool(args.url) == bool(args.llm):
        return "pass exactly one of --url URL (a running server) and --llm local (a managed llama.cpp server)"
    try:
        levels = sorted({int(x) for x in args.levels.split(",") if x.strip()})
    except ValueError:
        return f"--levels must be comma-separated integers, got {args.levels!r}"
    if not levels or levels[0] < 1 or levels[0] != 1:
        return "--levels must include 1 (the lone-sequence speed) and only positive integers"
    args.level_list = levels
    for name in ("parallel", "ctx", "requests", "decode_tokens", "prefill_repeats", "seeds", "proposals",
                 "llm_max_tokens"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    for name in ("threads", "slots", "kv_cache_tokens"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    if args.time_scale <= 0:
        return "--time-scale must be positive"
    for db in args.lengths_from or []:
        if not db.is_file():
            return f"--lengths-from {db}: no such database file"
    if args.out.parent and not args.out.parent.exists():
        return f"--out {args.out}: the folder {args.out.parent} does not exist"
    if args.check:
        from evotui.bench import run as bench

        try:
            args.check_modes = bench._parse_modes(args.check)
        except ValueError as exc:
            return str(exc)
        if len(args.check_modes) < 2:
            return "--check needs at least two modes to compare (e.g. sync,async)"
    return None


def main(args: argparse.Namespace) -> int:
    from engine.llm.local import LocalServerError
    from engine.llm.sim.calibrate_fit import FitError
    from engine.llm.sim.calibrate_probe import ProbeError
    from engine.run.runner import SetupError

    problem = _validate(args)
    if problem:
        return _bad(problem)
    try:
        return asyncio.run(_main(args))
    except (LocalServerError, ProbeError, FitError, SetupError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 3 if isinstance(exc, ProbeError) else 2)


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _main(args: argparse.Namespace) -> int:
    from engine.llm.local import LocalServer, resolve_model
    from engine.llm.redact import redact_url

    if not args.llm:
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        settings = f"{redact_url(args.url)} (model {args.model})"
        return await _measure_and_check(args, args.url, args.model, key, settings, None)
    server = LocalServer(resolve_model(args.llm_model_path), parallel=args.parallel, ctx=args.ctx,
                         threads=args.threads, aliases={args.model})
    try:
        await server.start()
        settings = (f"managed llama.cpp, {server.model.name}, {server.parallel} slots x {server.ctx} ctx, "
                    f"{server.threads} threads")
        log(f"  {settings} at {server.url}, ready in {server.startup_s:.1f}s")
        return await _measure_and_check(args, server.url, args.model, None, settings, server.parallel)
    finally:
        server.stop()


def recorded_lengths(dbs: list[Path]) -> dict[str, list[int]]:
    """Output tokens per stage of the answered calls (ok or cut at max_tokens) the runs recorded."""
    import sqlite3

    from engine.llm.sim.calibrate_fit import FitError

    out: dict[str, list[int]] = {}
    for db in dbs:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT stage, completion_tokens FROM llm_calls WHERE status IN ('ok', 'length') "
                                "AND completion_tokens > 0").fetchall()
        except sqlite3.DatabaseError as exc:
            raise FitError(f"{db} is not an evotui database with recorded calls ({exc})") from None
        finally:
            conn.close()
        for stage, n in rows:
            out.setdefault(str(stage or "default"), []).append(int(n))
    return out


async def _server_props(probe: Probe) -> tuple[int | None, int | None]:
    """(slots, context per slot) from llama.cpp's /props; (None, None) elsewhere."""
    import httpx

    root = probe.url.rstrip("/").removesuffix("/v1")
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            data = (await http.get(root + "/props")).json()
    except (httpx.HTTPError, ValueError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    slots = data.get("total_slots")
    ctx = (data.get("default_generation_settings") or {}).get("n_ctx")
    return (slots if isinstance(slots, int) and slots > 0 else None,
            ctx if isinstance(ctx, int) and ctx > 0 else None)


async def measure(args: argparse.Namespace, url: str, model: str, key: str | None,
                  slots_known: int | None) -> tuple[fitting.Fit, list]:
    from engine.llm.sim import calibrate_fit as fitting
    from engine.llm.sim.calibrate_probe import Probe, prompt_of

    probe = Probe(url, model, api_key=key, max_tokens=args.decode_tokens)
    props_slots, ctx = await _server_props(probe)
    slots = args.slots or slots_known or props_slots or args.level_list[-1]
    kv = args.kv_cache_tokens or (slots * ctx if ctx else None)
    levels = []
    async with probe.client() as http:
        await probe.check_ignore_eos(http)
        if not probe.ignore_eos:
            log("  the server refused ignore_eos: probe requests decode their natural lengths")
        prefill = await probe.prefill(http, PREFILL_UNITS, repeats=args.prefill_repeats)
        cache_units = PREFILL_UNITS[1] if fitting.prefix_probe_long(prefill) else PREFILL_UNITS[0]
        prefix_probe = await probe.prefix_cache(http, prompt_of(cache_units), rounds=args.prefill_repeats)
        log(f"  {fitting.prefix_cached(*prefix_probe)[1]}")
        for c in args.level_list:
            lv = await probe.level(http, prompt_of(SHORT_PROMPT_UNITS), c, args.requests)
            levels.append(lv)
            log(f"  concurrency {c}: {lv.aggregate_tok_s:.1f} tok/s aggregate, "
                f"{fitting.level_decode_rate(lv) or 0:.1f} tok/s per sequence")
        alone, during = await probe.decode_during_prefill(http, prompt_of(PREFILL_UNITS[1]))
        lengths = {}
        if not args.lengths_from:
            natural = await probe.lengths(http, [prompt_of(SHORT_PROMPT_UNITS)] * 6, args.llm_max_tokens)
            lengths = {"default": fitting.fit_lengths(natural, args.llm_max_tokens)}
    if args.lengths_from:
        lengths = fitting.fit_stage_lengths(recorded_lengths(args.lengths_from), args.llm_max_tokens)
    shared = fitting.shares_compute(alone, during)
    log(f"  decode alone {alone:.1f} tok/s, while a prompt is prefilled {during:.1f} tok/s: "
        f"{'shares' if shared else 'does not share'} compute with prefill")
    fit = fitting.fit(levels, prefill, slots=slots, kv_cache_tokens=kv, prefill_shares_compute=shared,
                      lengths=lengths, prefix_probe=prefix_probe)
    return fit, levels


async def _measure_and_check(args: argparse.Namespace, url: str, model: str, key: str | None, settings: str,
                             slots_known: int | None) -> int:
    from engine.llm.sim import calibrate_fit as fitting

    fit, levels = await measure(args, url, model, key, slots_known)
    args.out.write_text(fitting.profile_toml(fit, source=settings, levels=levels))
    log(f"  s1 {fit.single_seq_tok_s:.1f} tok/s, peak {fit.peak_tok_s:.1f} tok/s, prefill "
        f"{fit.prefill_tok_s:.1f} tok/s, {fit.max_num_seqs} slots; profile written to {args.out}")
    if not args.check:
        return 0
    from evotui.bench import sim_check

    return await sim_check.run(args, url, model, fit, settings, log)
