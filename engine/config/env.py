"""The environment layer of the run config: EVOTUI_<SECTION>__<KEY>=value (batch jobs, CI).

Order (engine/config/__init__.py): defaults < task.toml [defaults] < --config FILE < environment < flags.
Only names with a double underscore are config; EVOTUI_DB and the other single-name variables
keep their own meanings. Deeper keys nest further: EVOTUI_TRACKING__MLFLOW__URI.
"""

from __future__ import annotations

import json
from typing import Mapping

from engine.config import ConfigError

PREFIX = "EVOTUI_"


def _value(name: str, raw: str):
    """A list or table is JSON; anything else stays text, which the model converts to its
    field's type ("20" for an int, "true" for a bool) as it does for a TOML string."""
    if raw.lstrip().startswith(("[", "{")):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"environment variable {name}: {raw!r} is not valid JSON ({exc.msg}); "
                              "write lists and tables as JSON, e.g. '{\"rollout\": 8}'") from None
    return raw


def env_layers(environ: Mapping[str, str]) -> list[tuple[str, dict]]:
    """One layer per EVOTUI_<SECTION>__<KEY> variable, sorted by name, each named after its
    variable so that an error (or `evotui config show`) points at the one to fix."""
    layers: list[tuple[str, dict]] = []
    for name in sorted(environ):
        if not name.startswith(PREFIX) or "__" not in name:
            continue
        parts = name[len(PREFIX):].lower().split("__")
        if any(not p or p.startswith("_") or p.endswith("_") for p in parts):
            raise ConfigError(f"environment variable {name}: not EVOTUI_<SECTION>__<KEY> (e.g. "
                              "EVOTUI_PIPELINE__MODE=sync); rename or unset it")
        layer: dict = {}
        node = layer
        for key in parts[:-1]:
            node = node.setdefault(key, {})
        node[parts[-1]] = _value(name, environ[name])
        layers.append((f"environment variable {name}", layer))
    return layers
