"""load_any_task: one entry point for every task kind and folder format."""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from engine.config import format_validation_error
from engine.tasks.program_task import EXPECTED, ProgramSettings, ProgramTask, detect_format, load_program_task
from engine.tasks.prompt_task import PromptTask, TaskError, load_task, read_task_toml, resolve_task_path


def load_any_task(name_or_path: str) -> PromptTask | ProgramTask:
    """A prompt task (task.toml kind = "prompt") or a program task (native, OpenEvolve, ShinkaEvolve)."""
    folder = resolve_task_path(name_or_path, detect_format)
    fmt = detect_format(folder)
    if fmt is None:
        present = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
        raise TaskError(f"{folder}: not a task folder; {EXPECTED}; found {present}")
    if fmt == "toml":
        kind = read_task_toml(folder / "task.toml").get("kind", "prompt")
        if kind == "prompt":
            return load_task(str(folder))
        if kind != "program":
            raise TaskError(f"{folder / 'task.toml'}: kind {kind!r} is not supported; use \"prompt\" or \"program\"")
    return load_program_task(folder)


def with_program_settings(task, overrides: dict):
    """The task with RunConfig.program applied over its own program settings (TaskError naming
    the key when one is wrong); a prompt task refuses program settings."""
    if not overrides:
        return task
    if getattr(task, "kind", "prompt") != "program":
        raise TaskError(f"[program] settings ({', '.join(sorted(overrides))}) apply to program tasks; "
                        f"{task.name} is a prompt task")
    try:
        settings = ProgramSettings.model_validate({**task.settings.model_dump(), **overrides})
    except ValidationError as err:
        raise TaskError(format_validation_error(err, "[program] settings")) from None
    return replace(task, settings=settings)
