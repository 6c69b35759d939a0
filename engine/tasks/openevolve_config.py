"""OpenEvolve's config.yaml read as evotui settings: program settings, run config and a list of
what has no evotui meaning (and why), so an OpenEvolve user's file runs as they meant it.

map_openevolve(data, source) -> OpenEvolveConfig(settings, run, ignored, notes)
  settings: ProgramSettings entries (the task's [program] table)
  run:      RunConfig entries (endpoints, budget, seed), below --config and flags
Keys with a meaning here are honoured; `llm.*` names the endpoint the run talks to, so a config
that points at a vLLM server runs against it, never quietly on the simulated backend.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

OPENEVOLVE_DEFAULTS = {"eval_timeout_s": 300.0, "cascade": True}
"""OpenEvolve's own evaluator defaults, applied to OpenEvolve folders whose config leaves them unset."""

# config key path -> ProgramSettings field
_SETTINGS = {
    ("prompt", "system_message"): "system_message",
    ("evaluator", "timeout"): "eval_timeout_s",
    ("evaluator", "cascade_evaluation"): "cascade",
    ("evaluator", "cascade_thresholds"): "cascade_thresholds",
    ("evaluator", "parallel_evaluations"): "eval_concurrency",
    ("evaluator", "max_retries"): "eval_retries",
    ("prompt", "num_top_programs"): "num_top",
    ("prompt", "num_diverse_programs"): "num_diverse",
    ("database", "archive_size"): "elite_size",
    ("database", "exploration_ratio"): "explore_prob",
    ("max_code_length",): "max_code_length",
}
# config key path -> RunConfig path
_RUN = {
    ("max_iterations",): "budget.max_proposals",
    ("random_seed",): "seed",
    ("llm", "temperature"): "task_llm.temperature",
    ("llm", "max_tokens"): "task_llm.max_tokens",
    ("llm", "timeout"): "task_llm.read_timeout_s",
    ("llm", "retries"): "task_llm.max_retries",
}
# Keys that OpenEvolve reads and that have a reason to be ignored here.
_WHY = {
    "llm.top_p": "evotui sends no top_p",
    "llm.retry_delay": "evotui backs off exponentially with jitter (backoff_base_s)",
    "database.num_islands": "islands arrive with the LoongFlow strategy",
    "database.migration_interval": "islands arrive with the LoongFlow strategy",
    "database.migration_rate": "islands arrive with the LoongFlow strategy",
    "database.population_size": "evotui keeps every evaluated program",
    "database.exploitation_ratio": "evotui's selection is a tournament plus explore_prob",
    "log_level": "evotui logs to its database and events",
    "checkpoint_interval": "evotui commits every attempt to SQLite",
}
_ENV_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


@dataclass
class OpenEvolveConfig:
    settings: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    language: str | None = None
    """`language`: the candidate's language (engine/code/languages.py), read by the task loader."""
    file_suffix: str | None = None
    """`file_suffix`: the candidate file's suffix (e.g. ".rs")."""

    def warnings(self, source: str) -> list[str]:
        out = [f"{source}: {note}" for note in self.notes]
        if self.ignored:
            out.append(f"{source}: ignored: {'; '.join(self.ignored)}")
        return out


def _put(tree: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        tree = tree.setdefault(key, {})
    tree[leaf] = value


def _flatten(data: dict, prefix: tuple = ()) -> dict[tuple, object]:
    out: dict[tuple, object] = {}
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, dict) and value:
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def _model_of(llm: dict, out: OpenEvolveConfig) -> str | None:
    """OpenEvolve's `models` (weighted ensemble) or `primary_model`: evotui asks one model per
    endpoint, the heaviest of the ensemble."""
    models = [m for m in llm.get("models") or [] if isinstance(m, dict) and m.get("name")]
    if models:
        heaviest = max(models, key=lambda m: float(m.get("weight", 1.0) or 0.0))
        if len(models) > 1:
            out.notes.append(f"llm.models: an ensemble of {len(models)} models; evotui uses the heaviest, "
                             f"{heaviest['name']!r}, for every request")
        return str(heaviest["name"])
    primary = llm.get("primary_model")
    return str(primary) if primary else None


def _endpoint(llm: dict, out: OpenEvolveConfig) -> None:
    base = llm.get("api_base")
    model = _model_of(llm, out)
    if not base:
        if model:
            # The model belongs to an endpoint; without one the simulated backend answers.
            out.notes.append(f"llm names model {model!r} but no api_base: the run uses the simulated backend "
                             "unless --llm-url URL --model NAME is given")
        return
    _put(out.run, "task_llm.url", str(base).rstrip("/"))
    if model:
        _put(out.run, "task_llm.model", model)
    key = llm.get("api_key")
    ref = _ENV_REF.match(str(key)) if key else None
    if ref:
        _put(out.run, "task_llm.api_key_env", ref.group(1))
    elif key:
        # A literal key would end up in the database with the run's config: refuse to carry it.
        out.notes.append("llm.api_key holds a literal key, which evotui never stores; put it in an environment "
                         "variable and write api_key: ${VARIABLE} (or pass --api-key-env)")
    elif os.environ.get("OPENAI_API_KEY"):
        _put(out.run, "task_llm.api_key_env", "OPENAI_API_KEY")  # OpenEvolve's default when api_key is unset


def map_openevolve(data: dict) -> OpenEvolveConfig:
    out = OpenEvolveConfig()
    llm = data.get("llm") if isinstance(data.get("llm"), dict) else {}
    _endpoint(llm, out)
    handled_llm = {"api_base", "api_key", "models", "primary_model", "primary_model_weight", "secondary_model",
                   "secondary_model_weight", "evaluator_models"}
    for path, value in _flatten(data).items():
        name = ".".join(path)
        if path[0] == "llm" and len(path) > 1 and path[1] in handled_llm:
            continue
        if value is None:
            continue
        if path in (("language",), ("file_suffix",)):
            setattr(out, path[0], str(value))
        elif path == ("diff_based_evolution",):
            out.settings["patch_format"] = "diff" if value else "full"
        elif path in _SETTINGS:
            out.settings[_SETTINGS[path]] = value
        elif path in _RUN:
            _put(out.run, _RUN[path], value)
        else:
            out.ignored.append(f"{name} ({_WHY.get(name, 'no evotui equivalent')})")
    return out


def read_openevolve_yaml(path: Path) -> dict:
    """The YAML file as a mapping; ValueError with a one-line reason otherwise."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         "save it as UTF-8 YAML") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return data
