"""Weights & Biases through wandb.init: the W&B run id is the evotui run id and resume="allow",
so a resume continues the same W&B run (offline: its sessions sync into one run with
`wandb sync`). Imported only when [tracking.wandb] is set."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from engine.tracking.base import MetricRow, RunIdentity

STEP_KEYS = {"proposal": "proposal", "minute": "minute"}
"""The x-axis each kind of row is plotted against (W&B custom step metrics)."""


def wandb_id(run_id: str) -> str:
    """W&B run ids allow letters, digits, - and _ (evotui's already fit; kept safe anyway)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", run_id)[:64]


class WandbBackend:
    name = "wandb"

    def __init__(self, project: str, entity: str | None, mode: str, directory: Path) -> None:
        self.project, self.entity, self.mode, self.directory = project, entity, mode, directory
        self.run = None
        self._defined: set[str] = set()

    def start(self, identity: RunIdentity) -> str:
        # The front ends own the terminal: wandb's own progress lines ("Adding directory to
        # artifact...") would interleave with evotui's (the user can still set WANDB_SILENT=false).
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        self.directory.mkdir(parents=True, exist_ok=True)
        self.run = run = wandb.init(
            project=self.project, entity=self.entity, id=wandb_id(identity.run_id), name=identity.run_id,
            resume="allow", mode=self.mode, dir=str(self.directory), config=dict(identity.params),
            tags=[identity.task], reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True),
        )
        for axis in STEP_KEYS.values():
            run.define_metric(axis)
        return run.id

    def log_metrics(self, rows: list[MetricRow]) -> None:
        points: dict[tuple[str, int], dict[str, float]] = {}
        for r in rows:
            key = r.key if r.axis == "proposal" else f"per_minute/{r.key}"
            if key not in self._defined:
                self.run.define_metric(key, step_metric=STEP_KEYS[r.axis])
                self._defined.add(key)
            points.setdefault((r.axis, r.step), {})[key] = r.value
        for (axis, step), values in points.items():
            self.run.log({**values, STEP_KEYS[axis]: step})

    def log_artifact(self, path: Path, name: str) -> None:
        import wandb

        art = wandb.Artifact(name=f"{self.run.id}-{name}", type=name)
        if path.is_dir():
            art.add_dir(str(path))
        else:
            art.add_file(str(path))
        self.run.log_artifact(art)

    def log_summary(self, summary: Mapping[str, float]) -> None:
        self.run.summary.update(dict(summary))

    def finish(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "completed" else 1)
