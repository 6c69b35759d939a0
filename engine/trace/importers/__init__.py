"""`evotui import PATH`: what PATH holds decides how it is read. An EvoTrace folder (manifest.json,
engine/trace/importer.py), an OpenEvolve checkpoint, a ShinkaEvolve database or a GEPA run_dir
(one module each here) all become a Trace that importer.write_trace stores as a read-only run.

The run records the task folder that produced it when one is known: `--task`, else the nearest
folder above PATH that is a task folder (an OpenEvolve example keeps its run in
`<task>/openevolve_output/`); `evotui branch` continues the run on that task."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.trace.errors import TraceError
from engine.trace.model import Trace

FORMATS = ("evotrace", "openevolve", "shinka", "gepa")
EXPECTED = ("an EvoTrace folder (manifest.json), an OpenEvolve checkpoint (checkpoint_N/ with metadata.json and "
            "programs/, or the output folder holding checkpoints/), a ShinkaEvolve database (programs.sqlite) "
            "or a GEPA run_dir (gepa_state.bin)")
_TASK_SEARCH_LEVELS = 4


@dataclass
class Imported:
    trace: Trace
    fmt: str
    task_found: str | None
    """How the task folder was found: "--task", "near the source", "recorded" or None (none known)."""


def detect(path: Path) -> str | None:
    from engine.trace.importers import gepa, openevolve, shinka

    if path.is_dir() and (path / "manifest.json").is_file():
        return "evotrace"
    if gepa.is_run_dir(path):
        return "gepa"
    if openevolve.find_checkpoint(path) is not None:
        return "openevolve"
    if shinka.find_database(path) is not None:
        return "shinka"
    return None


def _load_task(spec: str) -> tuple[str, str]:
    """(name, resolved folder) of a task folder or built-in task name; TraceError if it is none."""
    from engine.config import ConfigError
    from engine.tasks.loader import load_any_task
    from engine.tasks.prompt_task import TaskError

    try:
        task = load_any_task(spec)
    except (TaskError, ConfigError) as exc:
        raise TraceError(f"--task {spec}: {exc}") from None
    return task.name, str(Path(task.path).resolve())


def _task_near(path: Path) -> tuple[str, str] | None:
    from engine.tasks.program_task import detect_format

    folder = path.resolve()
    for parent in [folder, *folder.parents][:_TASK_SEARCH_LEVELS + 1]:
        if parent.is_dir() and detect_format(parent) is not None:
            try:
                return _load_task(str(parent))
            except TraceError:
                return None  # looks like a task folder but does not load: record none
    return None


def read_any(path: Path, task: str | None = None) -> Imported:
    """The run at `path` as a Trace, all checks done before the database is touched."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    fmt = detect(path)
    if fmt is None:
        raise TraceError(f"{path}: not a run evotui can import; expected {EXPECTED}")
    named = _load_task(task) if task else None
    if fmt == "evotrace":
        from engine.trace import importer

        trace = importer.read_trace(path)
        if named:
            trace.run["task"], trace.run["task_path"] = named
        return Imported(trace, fmt, "--task" if named else "recorded" if trace.run.get("task_path") else None)
    from engine.trace.importers import gepa, openevolve, shinka

    native = {"openevolve": openevolve, "shinka": shinka, "gepa": gepa}[fmt].read(path)
    found = named or _task_near(native.source if native.source.is_dir() else native.source.parent)
    trace = native.to_trace(*(found or (None, None)))
    return Imported(trace, fmt, "--task" if named else "near the source" if found else None)
