"""load_any_task: one entry point for every task kind and folder format."""

from __future__ import annotations

from pathlib import Path

from engine.config import ConfigError, read_toml
from engine.tasks.program_task import EXPECTED, ProgramTask, detect_format, load_program_task
from engine.tasks.prompt_task import BUILTIN_DIR, PromptTask, TaskError, load_task


def _resolve(name_or_path: str) -> Path:
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve()
    for base in (BUILTIN_DIR, Path.cwd() / "tasks"):
        cand = base / name_or_path
        if cand.is_dir() and detect_format(cand):
            return cand.resolve()
    builtins = sorted(p.name for p in BUILTIN_DIR.iterdir() if p.is_dir() and detect_format(p)) if BUILTIN_DIR.is_dir() else []
    hint = f" built-in tasks: {', '.join(builtins)}" if builtins else ""
    raise TaskError(f"task {name_or_path!r}: no such folder;{hint} (or pass a path to a task folder)")


def load_any_task(name_or_path: str) -> PromptTask | ProgramTask:
    """A prompt task (task.toml kind = "prompt") or a program task (native, OpenEvolve, ShinkaEvolve)."""
    folder = _resolve(name_or_path)
    fmt = detect_format(folder)
    if fmt is None:
        present = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
        raise TaskError(f"{folder}: not a task folder; {EXPECTED}; found {present}")
    if fmt == "toml":
        try:
            kind = read_toml(folder / "task.toml").get("kind", "prompt")
        except ConfigError as exc:
            raise TaskError(str(exc)) from None
        if kind == "prompt":
            return load_task(str(folder))
        if kind != "program":
            raise TaskError(f"{folder / 'task.toml'}: kind {kind!r} is not supported; use \"prompt\" or \"program\"")
    return load_program_task(folder)
