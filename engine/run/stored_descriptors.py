"""The [[descriptor]] axes of a stored run's task, for views drawn from the database (`evotui show`,
the TUI attached to a run): its task.toml read again from the run's task_path, as `evotui resume`
does, so the islands grid they draw is the one the run uses (engine/strategy/descriptors.py)."""

from __future__ import annotations

from engine.strategy.descriptors import DescriptorError, Descriptors, parse_descriptors
from engine.tasks.prompt_task import TaskError, read_task_toml, resolve_task_path


def stored_descriptors(task_path: str | None) -> tuple[Descriptors | None, str | None]:
    """(the declared axes or None, a one-line warning when the task cannot be read or its axes are
    wrong: the caller then draws the default axes and says so). No task_path, no task.toml or no
    [[descriptor]] table: (None, None), the default axes."""
    if not task_path:
        return None, None
    try:
        folder = resolve_task_path(task_path)
    except TaskError:
        return None, f"task {task_path!r} is no longer there; the islands grid is drawn on the default axes"
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        return None, None  # an OpenEvolve or ShinkaEvolve folder: no [[descriptor]] there
    try:
        return parse_descriptors(read_task_toml(toml_path).get("descriptor"), str(toml_path)), None
    except (TaskError, DescriptorError) as err:
        return None, f"{err}; the islands grid is drawn on the default axes"
