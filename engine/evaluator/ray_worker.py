"""What a Ray worker runs for one evaluation: the same sandbox as a local run, on the worker.

The task folder arrives through the object store (engine/evaluator/shipping.py) and is unpacked
once per machine; the candidate travels with the request. The worker's sandbox detects its own
machine's isolation once per worker process, makes the scratch directory, scrubs the environment
and applies the same limits; the result comes back as the EvalResult's fields (plain data).
This module imports ray only inside the task (to fetch a bundle the machine has not seen).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from engine.evaluator.shipping import TaskBundle, folder_for, unpack
from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.core import GRACE_S
from engine.sandbox.results import EvalResult


@dataclass(frozen=True)
class EvalRequest:
    evaluator: str
    """The evaluator's path inside the task folder."""
    program_text: str
    mode: str
    cascade: bool
    thresholds: tuple[float, ...]
    limits: SandboxLimits
    program_name: str
    secret_vars: frozenset[str]
    scratch_root: str | None


def _bundle_folder(digest: str, bundle_ref: list, root: Path) -> Path:
    cached = folder_for(root, digest)
    if cached.is_dir():
        return cached
    import ray  # only on a worker that has not unpacked this task yet

    bundle: TaskBundle = ray.get(bundle_ref[0])
    return unpack(bundle, root)


def sweep_orphans(root: Path, older_than_s: float, now: float | None = None) -> list[str]:
    """Remove the scratch directories of workers that died mid-evaluation (a killed worker cannot
    clean up): named evotui-eval-PID-..., PID not alive here, untouched for older_than_s (past the
    evaluation's wall clock, so its sandbox has ended too). Returns the names removed."""
    now = time.time() if now is None else now
    removed = []
    for entry in Path(root).glob("evotui-eval-*"):
        pid = entry.name.split("-")[2]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        try:
            if now - entry.stat().st_mtime < older_than_s:
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


def run_request(digest: str, bundle_ref: list, req: EvalRequest) -> dict:
    """The Ray task's body: returns the EvalResult's fields plus where it ran."""
    root = Path(req.scratch_root or tempfile.gettempdir())
    folder = _bundle_folder(digest, bundle_ref, root)
    sweep_orphans(root, req.limits.wall_s + GRACE_S + 60.0)
    # A sandbox per request (its semaphore belongs to this request's event loop); the isolation
    # probe behind it runs once per worker process (engine.sandbox.isolation.detect is cached).
    sandbox = Sandbox(req.limits, concurrency=1, scratch_root=str(root), secret_vars=req.secret_vars)
    res: EvalResult = asyncio.run(sandbox.evaluate(
        folder / req.evaluator, req.program_text, mode=req.mode, cascade=req.cascade,
        thresholds=list(req.thresholds), limits=req.limits, program_name=req.program_name))
    import ray  # present: this runs in a Ray worker

    return {"result": dataclasses.asdict(res), "node": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(), "pid": os.getpid(),
            "isolation": sandbox.note}


def result_from(fields: dict) -> EvalResult:
    names = {f.name for f in dataclasses.fields(EvalResult)}
    return EvalResult(**{k: v for k, v in fields.items() if k in names})
