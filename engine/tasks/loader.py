"""load_any_task: one entry point for every task kind and folder format."""

from __future__ import annotations


from engine.config import ConfigError, read_toml
from engine.tasks.program_task import EXPECTED, ProgramTask, detect_format, load_program_task
from engine.tasks.prompt_task import PromptTask, TaskError, load_task, resolve_task_path


def load_any_task(name_or_path: str) -> PromptTask | ProgramTask:
    """A prompt task (task.toml kind = "prompt") or a program task (native, OpenEvolve, ShinkaEvolve)."""
    folder = resolve_task_path(name_or_path, detect_format)
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
