"""Prompt tasks (GEPA contract): a seed prompt, train/val JSONL examples and a metric.

The metric is the task author's code (trusted like a config file), loaded from the task folder;
it receives LLM output as plain data. task.toml:

    name, kind = "prompt", description, seed_prompt, train, val
    [[component]] name, text | file, evolvable, type, frozen, optimizer   # instead of seed_prompt: a
                                   # multi-component seed (engine/components/__init__.py: types, frozen regions)
    [metric] file, function       # function(example: dict, output: str) -> {"score", "feedback"}
    [input] template               # optional, str.format over the example (default "{input}")
    [defaults]                     # optional RunConfig overrides
    heldout = "heldout.jsonl"      # optional: examples only `evotui analyze` scores (default: that
                                   # file when it exists), never seen by a run
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from engine import components as comp
from engine.components import NAME, Component, Components, render
from engine.config import ConfigError, read_toml
from engine.costs.resources import data_dir

BUILTIN_DIR = data_dir("tasks", "engine")
KNOWN_KEYS = {"name", "kind", "description", "seed_prompt", "train", "val", "metric", "input", "defaults",
              "component", "heldout"}
HELDOUT = "heldout.jsonl"
"""The held-out split a task uses when its task.toml names none (heldout = "...")."""
COMPONENT_KEYS = {"name", "text", "file", "evolvable", "type", "frozen", "optimizer"}
METRIC_KEYS = {"file", "function", "range"}
INPUT_KEYS = {"template"}


class TaskError(Exception):
    """A problem with a task folder; the message names the file and the fix."""


def read_task_text(path: Path, what: str) -> str:
    """A task file's text; a file that is not UTF-8 (a binary or another encoding) or cannot be
    read is a TaskError naming it, not a traceback."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: {what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                        f"{exc.start}); save it as UTF-8 text or point task.toml at the right file") from None
    except OSError as exc:
        raise TaskError(f"{path}: cannot read {what} ({exc.strerror}); check the file and its permissions") from None


def read_task_toml(path: Path) -> dict:
    """task.toml as a dict; invalid TOML, a binary file or an unreadable one is a TaskError."""
    try:
        return read_toml(path)
    except ConfigError as exc:
        raise TaskError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                        "task.toml must be UTF-8 TOML") from None
    except OSError as exc:
        raise TaskError(f"{path}: cannot read it ({exc.strerror}); check the file and its permissions") from None


def _check_table_keys(toml_path: Path, table: str, spec: object, allowed: set[str]) -> None:
    """An unknown key inside [table] is refused like an unknown top-level key (a typo would
    otherwise be ignored without a word). A value that is not a table is left to its reader."""
    if not isinstance(spec, dict):
        return
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise TaskError(f"{toml_path}: unknown key(s) in [{table}]: {', '.join(unknown)}; allowed: "
                        f"{', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class MetricResult:
    score: float
    feedback: str


@dataclass(frozen=True)
class PromptTask:
    name: str
    path: Path
    description: str
    seed_prompt: str
    train: list[dict]
    val: list[dict]
    metric_fn: Callable[[dict, str], Any]
    input_template: str = "{input}"
    defaults: dict = field(default_factory=dict)
    score_range: tuple[float, float] = (0.0, 1.0)
    """[metric] range: scores outside it are refused (a metric bug, not a better prompt)."""
    kind: str = "prompt"
    seed_components: Components | None = None
    """[[component]] tables: the seed's named parts (seed_prompt is then their rendering); None =
    one component, the seed_prompt file."""
    heldout: list[dict] = field(default_factory=list)
    """The held-out split (`evotui analyze` re-scores the best-so-far chain on it); runs never see it."""

    @property
    def max_score(self) -> float:
        return self.score_range[1]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {ex["id"]: ex for ex in [*self.train, *self.val]})

    def example(self, example_id: str) -> dict:
        return self._by_id[example_id]  # type: ignore[attr-defined]

    @property
    def train_ids(self) -> list[str]:
        return [ex["id"] for ex in self.train]

    @property
    def val_ids(self) -> list[str]:
        return [ex["id"] for ex in self.val]

    def user_message(self, example: dict) -> str:
        try:
            return self.input_template.format(**example)
        except (KeyError, IndexError, ValueError) as exc:
            raise TaskError(
                f"{self.path / 'task.toml'}: [input] template cannot be filled for example "
                f"{example['id']!r} ({exc!r}); use keys present in every example"
            ) from None

    def score(self, example: dict, output: str) -> MetricResult:
        """Run the task's metric; a broken metric is the task author's bug and stops the run."""
        try:
            raw = self.metric_fn(example, output)
        except Exception as exc:
            raise TaskError(
                f"{self.path}: metric raised {type(exc).__name__}: {exc} on example {example['id']!r}; fix the metric"
            ) from exc
        if isinstance(raw, (int, float)):
            raw = {"score": raw, "feedback": ""}
        if not isinstance(raw, dict) or "score" not in raw:
            raise TaskError(f"{self.path}: metric must return a number or a dict with 'score' (got {type(raw).__name__})")
        try:
            score = float(raw["score"])
        except (TypeError, ValueError):
            raise TaskError(
                f"{self.path}: metric returned a non-numeric score {raw['score']!r} on example {example['id']!r}; return a number"
            ) from None
        if not math.isfinite(score):
            raise TaskError(f"{self.path}: metric returned a non-finite score on example {example['id']!r}")
        lo, hi = self.score_range
        if not lo <= score <= hi:
            raise TaskError(
                f"{self.path}: metric {getattr(self.metric_fn, '__name__', 'score')} returned {score:g} on example "
                f"{example['id']!r}, outside its range [{lo:g}, {hi:g}]; fix the metric or declare "
                "[metric] range = [low, high] in task.toml")
        return MetricResult(score=score, feedback=str(raw.get("feedback", "")))


def _has_task_toml(folder: Path) -> bool:
    return (folder / "task.toml").is_file()


def resolve_task_path(name_or_path: str, is_task: Callable[[Path], object] = _has_task_toml) -> Path:
    """A folder path as given, else a built-in task (or ./tasks/NAME) that `is_task` accepts."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve()
    for base in (BUILTIN_DIR, Path.cwd() / "tasks"):
        cand = base / name_or_path
        if cand.is_dir() and is_task(cand):
            return cand.resolve()
    builtins = sorted(p.name for p in BUILTIN_DIR.iterdir() if p.is_dir() and is_task(p)) if BUILTIN_DIR.is_dir() else []
    hint = f" built-in tasks: {', '.join(builtins)}" if builtins else ""
    raise TaskError(f"task {name_or_path!r}: no such folder;{hint} (or pass a path to a task folder)")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise TaskError(f"{path}: file not found; the task.toml names it")
    rows: list[dict] = []
    seen: set[str] = set()
    # io.StringIO splits lines as a text file does (not at U+2028 inside a JSON string).
    for lineno, line in enumerate(io.StringIO(read_task_text(path, "the examples file"), newline=None), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}:{lineno}: not valid JSON ({exc.msg}); one JSON object per line") from None
        if not isinstance(row, dict):
            raise TaskError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        if "id" not in row:
            row["id"] = f"{path.stem}-{lineno}"
        row["id"] = str(row["id"])
        if row["id"] in seen:
            raise TaskError(f"{path}:{lineno}: duplicate example id {row['id']!r}; ids must be unique")
        seen.add(row["id"])
        rows.append(row)
    if not rows:
        raise TaskError(f"{path}: no examples; add at least one JSON object line")
    return rows


def _score_range(toml_path: Path, spec: dict) -> tuple[float, float]:
    raw = spec.get("range", [0.0, 1.0]) if isinstance(spec, dict) else [0.0, 1.0]
    try:
        lo, hi = (float(v) for v in raw)
    except (TypeError, ValueError):
        raise TaskError(f"{toml_path}: [metric] range must be two numbers [low, high], got {raw!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise TaskError(f"{toml_path}: [metric] range [{lo:g}, {hi:g}] needs finite low < high")
    return lo, hi


def _load_metric(folder: Path, spec: dict) -> Callable[[dict, str], Any]:
    if not isinstance(spec, dict) or "file" not in spec:
        raise TaskError(f"{folder / 'task.toml'}: [metric] needs file = \"metric.py\" and function = \"score\"")
    file = folder / str(spec["file"])
    fn_name = str(spec.get("function", "score"))
    if not file.is_file():
        raise TaskError(f"{file}: metric file not found; check [metric] file in task.toml")
    mod_spec = importlib.util.spec_from_file_location(f"evotui_task_metric_{folder.name}", file)
    if mod_spec is None or mod_spec.loader is None:
        raise TaskError(f"{file}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:
        raise TaskError(f"{file}: importing the metric failed ({type(exc).__name__}: {exc})") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise TaskError(f"{file}: no function {fn_name!r}; define it or fix [metric] function")
    return fn


def _typed(where: str, part: Component, table: dict) -> Component:
    """`part` with its `type`, `frozen` regions and `optimizer`, checked against its seed text."""
    try:
        part = replace(part, optimizer=comp.check_optimizer(part.name, table.get("optimizer", comp.DEFAULT_OPTIMIZER)))
        return comp.with_rules(part, table.get("type", comp.DEFAULT_TYPE), table.get("frozen", []))
    except ValueError as exc:
        raise TaskError(f"{where} {exc}") from None


def _components(folder: Path, toml_path: Path, spec: dict) -> Components | None:
    """The seed's [[component]] tables, validated; None when the task uses seed_prompt."""
    raw = spec.get("component")
    if raw is None:
        if "seed_prompt" not in spec:
            raise TaskError(f"{toml_path}: missing required key 'seed_prompt' (or [[component]] tables)")
        return None
    if "seed_prompt" in spec:
        raise TaskError(f"{toml_path}: both seed_prompt and [[component]]; keep one (the components are the seed)")
    where = f"{toml_path}: [[component]]"
    if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
        raise TaskError(f"{where} must be tables: [[component]] with name = \"...\" and text = \"...\"")
    out: list[Component] = []
    for n, table in enumerate(raw, start=1):
        unknown = sorted(set(table) - COMPONENT_KEYS)
        if unknown:
            raise TaskError(f"{where} #{n}: unknown key(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(COMPONENT_KEYS))}")
        name = table.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise TaskError(f"{where} #{n}: name {name!r} must be a non-empty string of letters, digits, _ . -")
        if name in {c.name for c in out}:
            raise TaskError(f"{where} #{n}: duplicate name {name!r}; every component needs its own name")
        if ("text" in table) == ("file" in table):
            raise TaskError(f"{where} {name!r}: give exactly one of text = \"...\" or file = \"name.txt\"")
        if "file" in table:
            path = folder / str(table["file"])
            if not path.is_file():
                raise TaskError(f"{path}: component {name!r} file not found; check its file in task.toml")
            text = read_task_text(path, f"component {name!r}")
        else:
            text = table["text"]
            if not isinstance(text, str):
                raise TaskError(f"{where} {name!r}: text must be a string")
        flag = table.get("evolvable", True)
        if not isinstance(flag, bool):
            raise TaskError(f"{where} {name!r}: evolvable must be true or false, got {flag!r}")
        out.append(_typed(where, Component(name, text.strip(), flag), table))
    if not any(c.evolvable for c in out):
        raise TaskError(f"{where}: no component is evolvable; set evolvable = true on at least one")
    return tuple(out)


def load_task(name_or_path: str) -> PromptTask:
    folder = resolve_task_path(name_or_path)
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{folder}: no task.toml; a task folder needs one (see tasks/rules for an example)")
    spec = read_task_toml(toml_path)
    unknown = sorted(set(spec) - KNOWN_KEYS)
    if unknown:
        raise TaskError(f"{toml_path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KNOWN_KEYS))}")
    kind = spec.get("kind", "prompt")
    if kind != "prompt":
        raise TaskError(f"{toml_path}: kind {kind!r} is not supported yet; only kind = \"prompt\"")
    for key in ("train", "val", "metric"):
        if key not in spec:
            raise TaskError(f"{toml_path}: missing required key {key!r}")
    _check_table_keys(toml_path, "metric", spec["metric"], METRIC_KEYS)
    if "input" in spec and not isinstance(spec["input"], dict):
        raise TaskError(f"{toml_path}: input must be a table: [input] template = \"...\"")
    _check_table_keys(toml_path, "input", spec.get("input"), INPUT_KEYS)
    components = _components(folder, toml_path, spec)
    if components is None:
        seed_file = folder / str(spec["seed_prompt"])
        if not seed_file.is_file():
            raise TaskError(f"{seed_file}: seed prompt file not found; check seed_prompt in task.toml")
        seed_prompt = read_task_text(seed_file, "the seed prompt").strip()
    else:
        seed_prompt = render(components)
    template = str(spec.get("input", {}).get("template", "{input}")) if isinstance(spec.get("input"), dict) else "{input}"
    defaults = spec.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TaskError(f"{toml_path}: [defaults] must be a table")
    task = PromptTask(
        score_range=_score_range(toml_path, spec["metric"]),
        name=str(spec.get("name", folder.name)),
        path=folder,
        description=str(spec.get("description", "")),
        seed_prompt=seed_prompt,
        seed_components=components,
        train=_read_jsonl(folder / str(spec["train"])),
        val=_read_jsonl(folder / str(spec["val"])),
        metric_fn=_load_metric(folder, spec["metric"]),
        input_template=template,
        defaults=defaults,
    )
    overlap = set(task.train_ids) & set(task.val_ids)
    if overlap:
        raise TaskError(f"{folder}: train and val share example ids ({', '.join(sorted(overlap)[:3])}); make them unique")
    heldout_file = folder / str(spec["heldout"]) if "heldout" in spec else folder / HELDOUT
    if "heldout" in spec or heldout_file.is_file():
        held = _read_jsonl(heldout_file)
        shared = {ex["id"] for ex in held} & (set(task.train_ids) | set(task.val_ids))
        if shared:
            raise TaskError(f"{heldout_file}: held-out example ids also in train or val "
                            f"({', '.join(sorted(shared)[:3])}); a held-out split must be unseen")
        task = replace(task, heldout=held)
        task.user_message(held[0])
    for ex in (task.train[0], task.val[0]):
        task.user_message(ex)
    return task
