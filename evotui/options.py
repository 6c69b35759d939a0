"""Command-line flags -> a config layer holding only what the user actually typed."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from engine.config import ConfigError, EndpointConfig, read_toml
from engine.config.env import env_layers

BUDGET_FLAGS = {
    "max_proposals": "max_proposals",
    "max_llm_calls": "max_llm_calls",
    "max_tokens": "max_tokens",
    "max_metric_calls": "max_metric_calls",
    "max_wall": "max_wall_s",
    "max_wall_grace": "max_wall_grace_s",
    "max_usd": "max_usd",
    "max_gpu_hours": "max_gpu_hours",
    "prices": "prices_file",
}


def add_budget_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("budget (the run drains at the first limit reached)")
    g.add_argument("--max-proposals", type=int, metavar="N")
    g.add_argument("--max-llm-calls", type=int, metavar="N")
    g.add_argument("--max-tokens", type=int, metavar="N", help="prompt + completion tokens")
    g.add_argument("--max-metric-calls", type=int, metavar="N")
    g.add_argument("--max-usd", type=float, metavar="DOLLARS", help="LLM spend at the price table's prices "
                   "(worst case reserved per item, so the cap is never passed)")
    g.add_argument("--max-gpu-hours", type=float, metavar="H", help="GPU time of LLM calls to endpoints that "
                   "declare gpus (wall time x GPUs)")
    g.add_argument("--prices", metavar="FILE", help="a price table (the shape of engine/pricing/prices.toml) "
                   "whose entries replace or add to the shipped one")
    g.add_argument("--max-wall", type=float, metavar="SECONDS", help="a deadline over all sessions: at it nothing "
                   "new starts, and work still running after the grace is cancelled (resume redoes it)")
    g.add_argument("--max-wall-grace", type=float, metavar="SECONDS", help="how long in-flight work may finish "
                   "after --max-wall (default: a tenth of it, at most 60 s)")


def add_resume_flags(p: argparse.ArgumentParser) -> None:
    add_budget_flags(p)
    p.add_argument("--take-over", action="store_true", help="kill the run's driver on this host if it is stuck "
                   "(heartbeat stale, no answer on its control socket) and continue the run")
    g = p.add_argument_group("endpoints (credentials inside URLs are never stored: give the URL again)")
    g.add_argument("--llm-url", metavar="URL", help="the run's task endpoint, e.g. http://user:KEY@host/v1")
    g.add_argument("--reflection-url", metavar="URL", help="the run's proposer endpoint, if it had its own")
    add_evaluator_flags(p)


def add_evaluator_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("evaluations (program tasks; [evaluator] in --config)")
    g.add_argument("--evaluator", choices=["local", "ray"], help="local: sandbox subprocesses here (default); ray: the "
                   "same sandbox in Ray tasks (without --ray-address, a local Ray instance for the run)")
    g.add_argument("--ray-address", metavar="ADDR", help='the Ray cluster: "auto", HOST:PORT or ray://HOST:PORT')
    g.add_argument("--gpus", metavar="auto|ID,ID|none", help="local: GPU slots, each evaluation sees one device "
                   '("auto": NVIDIA_VISIBLE_DEVICES or nvidia-smi; default: devices left as they are)')
    g.add_argument("--evals-per-gpu", type=int, metavar="N", help="local: evaluations sharing one GPU at once")


def evaluator_layer(args: argparse.Namespace) -> dict:
    out: dict = {}
    if getattr(args, "evaluator", None):
        out["backend"] = args.evaluator
    if getattr(args, "ray_address", None):
        out["address"] = args.ray_address
        out.setdefault("backend", "ray")
    gpus = getattr(args, "gpus", None)
    if gpus is not None:
        ids = [d.strip() for d in gpus.split(",") if d.strip()]
        if gpus.strip() not in ("auto", "none") and not ids:
            raise ConfigError(f'--gpus {gpus!r}: give "auto", "none" or device ids such as 0,1')
        out["gpus"] = None if gpus.strip() == "none" else "auto" if gpus.strip() == "auto" else ids
    if getattr(args, "evals_per_gpu", None) is not None:
        out["evals_per_gpu"] = args.evals_per_gpu
    return {"evaluator": out} if out else {}


def add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML config (see README); flags override it")
    g = p.add_argument_group("LLM endpoints (default: the embedded simulated backend)")
    g.add_argument("--llm-url", metavar="URL", help="OpenAI-compatible base URL incl. /v1, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", metavar="NAME", help="model name at --llm-url")
    add_local_flags(g)
    g.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    g.add_argument("--reflection-url", metavar="URL", help="separate endpoint for the proposer (default: --llm-url)")
    g.add_argument("--reflection-model", metavar="NAME")
    g.add_argument("--stream", action="store_true", default=None, help="use streaming (SSE) requests")
    g.add_argument("--profile", choices=["vllm", "api"], help="simulated backend profile")
    g.add_argument("--time-scale", type=float, metavar="X", help="simulated seconds per wall second")
    add_evaluator_flags(p)
    e = p.add_argument_group("pipeline")
    e.add_argument("--mode", choices=["async", "sync", "pxn", "chain"],
                   help="default: chain for prompt tasks under gepa (8 chains) and program tasks under "
                        "openevolve (12 chains), async otherwise or when an async-only option is set "
                        "(`evotui config show` names the layer that chose it)")
    e.add_argument("--strategy", metavar="NAME", help="search strategy (`evotui strategies` lists them); default: "
                   "gepa on prompt tasks, openevolve on program tasks")
    e.add_argument("--policy", choices=["full", "guarded", "reflective"])
    e.add_argument("--max-gap", type=int, metavar="N", help="guarded policy: largest allowed version gap")
    e.add_argument("--workers", metavar="STAGE=N,...", help="e.g. rollout=8,propose=4,evaluate=8")
    e.add_argument("--max-in-flight", type=int, metavar="N", help="async: most items in the pipeline at once")
    e.add_argument("--chains", type=int, metavar="N", help="chain: most proposal chains at once")
    e.add_argument("--chains-min", type=int, metavar="N", help="chain: fewest chains (they start there and "
                   "adapt up to --chains; equal to --chains: a fixed count)")
    e.add_argument("--minibatch", type=int, metavar="N")
    e.add_argument("--seed", type=int)
    add_budget_flags(p)


def add_local_flags(g) -> None:
    g.add_argument("--llm", choices=["sim", "local"], help="local: start a managed llama.cpp server on 127.0.0.1 "
                   "with the bundled SmolLM2-135M (or --llm-model-path) and stop it when the run ends")
    g.add_argument("--llm-model-path", metavar="FILE.gguf", help="--llm local: serve this GGUF model instead")


LOCAL_DEFAULTS = {"task_llm": {"url": "local://", "model": "local", "max_tokens": 512, "temperature": 0.7}}
"""Settings --llm local starts from (below --config and the other flags): a small model on CPU
answers in hundreds of tokens, and one slot's context is [local] ctx (2048) tokens."""


def local_layers(args: argparse.Namespace) -> tuple[list[tuple[str, dict]], dict]:
    """(layers to put below --config, entries for the command-line layer) for --llm/--llm-model-path."""
    llm, model_path = getattr(args, "llm", None), getattr(args, "llm_model_path", None)
    if model_path and llm != "local":
        raise ConfigError("--llm-model-path needs --llm local")
    if llm != "local":
        # --llm sim replaces any endpoint a config names, model included (it belongs to that endpoint).
        sim = {"task_llm": {"url": "sim://", "model": EndpointConfig.model_fields["model"].default}}
        return [], (sim if llm == "sim" else {})
    if getattr(args, "llm_url", None):
        raise ConfigError("--llm local and --llm-url exclude each other; pass one of them")
    cli: dict = {"task_llm": {"url": "local://"}}
    if model_path:
        cli["local"] = {"model_path": str(Path(model_path).expanduser().resolve())}
    return [("--llm local defaults", LOCAL_DEFAULTS)], cli


def shown_warnings(args: argparse.Namespace) -> set[str]:
    """Warnings this command has printed: the task folder's own config.yaml given again with
    --config would otherwise list its ignored keys twice."""
    return vars(args).setdefault("shown_warnings", set())


def read_config_file(path: Path, shown: set[str] | None = None) -> dict:
    """A --config file: evotui TOML, or an OpenEvolve YAML (its keys mapped, the rest listed)."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        return read_toml(path)
    from engine.tasks.openevolve_config import map_openevolve, read_openevolve_yaml

    try:
        mapped = map_openevolve(read_openevolve_yaml(path))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for warning in mapped.warnings(path.name):
        print(f"evotui: warning: {warning}", file=sys.stderr)
        if shown is not None:
            shown.add(warning)
    return {**mapped.run, **({"program": mapped.settings} if mapped.settings else {})}


def _put(layer: dict, path: str, value) -> None:
    node = layer
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def parse_workers(spec: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, (s.strip() for s in spec.split(","))):
        stage, sep, count = part.partition("=")
        if not sep or not count.strip().isdigit():
            raise ConfigError(f"--workers: {part!r} is not STAGE=N (e.g. rollout=8,propose=4)")
        out[stage.strip()] = int(count)
    return out


def budget_layer(args: argparse.Namespace) -> dict:
    out = {key: getattr(args, flag) for flag, key in BUDGET_FLAGS.items() if getattr(args, flag, None) is not None}
    if "prices_file" in out:  # a resume may start elsewhere: keep the file, not the relative name
        out["prices_file"] = str(Path(out["prices_file"]).expanduser().resolve())
    return out


def config_layers(args: argparse.Namespace) -> list[tuple[str, dict]]:
    below, cli = local_layers(args)
    layers: list[tuple[str, dict]] = list(below)
    if args.config is not None:
        layers.append((str(args.config), read_config_file(args.config, shown_warnings(args))))
    layers.extend(env_layers(os.environ))  # EVOTUI_<SECTION>__<KEY>: above the file, below the flags
    simple = {
        "llm_url": "task_llm.url",
        "model": "task_llm.model",
        "api_key_env": "task_llm.api_key_env",
        "stream": "task_llm.stream",
        "profile": "sim.profile",
        "time_scale": "sim.time_scale",
        "mode": "pipeline.mode",
        "strategy": "strategy.name",
        "policy": "pipeline.policy",
        "max_gap": "pipeline.max_gap",
        "minibatch": "pipeline.minibatch_size",
        "max_in_flight": "pipeline.max_in_flight",
        "chains": "pipeline.chains",
        "chains_min": "pipeline.chains_min",
        "seed": "seed",
    }
    for flag, path in simple.items():
        value = getattr(args, flag, None)
        if value is not None:
            _put(cli, path, value)
    if args.reflection_url or args.reflection_model:
        _put(cli, "reflection_llm.url", args.reflection_url or args.llm_url or "sim://")
        if args.reflection_model or args.model:
            _put(cli, "reflection_llm.model", args.reflection_model or args.model)
        if args.api_key_env:
            _put(cli, "reflection_llm.api_key_env", args.api_key_env)
    if args.seed is not None:
        _put(cli, "sim.seed", args.seed)
    if args.workers:
        _put(cli, "pipeline.workers", parse_workers(args.workers))
    budget = budget_layer(args)
    if budget:
        cli["budget"] = budget
    cli.update(evaluator_layer(args))
    layers.append(("command line", cli))
    return layers


async def open_run(args: argparse.Namespace):
    """The EngineRun a `run` or `resume` command asks for (raises SetupError); prints the
    task's warnings once. Shared by the headless and the TUI front ends."""
    from engine.run.runner import EngineRun

    if args.command == "run":
        run = await EngineRun.create(args.task, config_layers(args), args.db)
    else:
        endpoints: dict = {}
        if getattr(args, "llm_url", None):
            _put(endpoints, "task_llm.url", args.llm_url)
        if getattr(args, "reflection_url", None):
            _put(endpoints, "reflection_llm.url", args.reflection_url)
        from evotui.commands.takeover import clear_stuck_driver

        notice = await clear_stuck_driver(Path(args.db), args.run_id, getattr(args, "take_over", False))
        if notice:
            print(notice, file=sys.stderr)
        run = await EngineRun.resume(args.db, args.run_id, budget_layer(args), {**endpoints, **evaluator_layer(args)})
    shown = shown_warnings(args)
    for warning in [*getattr(run.ctx.task, "warnings", ()), *getattr(run.ctx, "setup_warnings", ())]:
        if warning not in shown:
            shown.add(warning)
            print(f"evotui: warning: {warning}", file=sys.stderr)
    return run
