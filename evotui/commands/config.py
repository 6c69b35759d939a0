"""`evotui config schema` (the run config's JSON Schema, for editors and CI) and `evotui config
show` (the effective config of a run the same flags would start, each value with its layer)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Iterator

from engine.config import ConfigError, RunConfig, build_config
from engine.llm.redact import redact_mapping
from evotui import options

DEFAULT_SOURCE = "default"


def add_arguments(cfg) -> None:
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    cfg_sub.add_parser("schema", help="print the JSON Schema of a --config file (unknown keys are errors)")
    show = cfg_sub.add_parser("show", help="print the effective config with the layer each value comes from "
                              "(defaults < task.toml < --config < EVOTUI_<SECTION>__<KEY> < flags)")
    show.add_argument("task", nargs="?", help="task folder or built-in task, to include its task.toml [defaults]")
    show.add_argument("--json", action="store_true", help="one JSON object: key -> {value, source}")
    options.add_run_flags(show)


def schema() -> dict:
    """The JSON Schema of the run config, from the pydantic models (extra keys forbidden)."""
    out = RunConfig.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **out}


def task_layers(task_ref: str, layers: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The layers a `run` of task_ref starts from, as EngineRun.create builds them."""
    from engine.config import new_run_layers
    from engine.tasks.loader import load_any_task
    from engine.tasks.prompt_task import TaskError

    try:
        task = load_any_task(task_ref)
    except TaskError as exc:
        raise ConfigError(str(exc)) from None
    return new_run_layers(task, layers)


def _leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*path, str(key)))
    else:
        yield path, node


def provenance(layers: list[tuple[str, dict]], config: RunConfig) -> dict[str, dict]:
    """Dotted key -> {value, source}: the last layer that set the key (or a table above it)."""
    set_by = [(name, {p for p, _ in _leaves(layer) if p}) for name, layer in layers]  # () = an empty layer
    out: dict[str, dict] = {}
    for path, value in _leaves(redact_mapping(config.model_dump(mode="json"))):
        source = DEFAULT_SOURCE
        for name, paths in set_by:
            if any(path[:len(p)] == p or p[:len(path)] == path for p in paths):
                source = name
        out[".".join(path)] = {"value": value, "source": source}
    return out


def main(args: argparse.Namespace) -> int:
    if args.config_command == "schema":
        print(json.dumps(schema(), indent=2))
        return 0
    layers = options.config_layers(args)
    if args.task:
        layers = task_layers(args.task, layers)
    shown = provenance(layers, build_config(layers))
    if args.json:
        print(json.dumps(shown, indent=1))
        return 0
    texts = {key: f"{key} = {json.dumps(entry['value'])}" for key, entry in shown.items()}
    width = max(map(len, texts.values()))
    for key, entry in shown.items():
        print(f"{texts[key]:<{width}}  # {entry['source']}")
    return 0
