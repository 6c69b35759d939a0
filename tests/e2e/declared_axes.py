"""A circle_packing task folder with two declared `[[descriptor]]` axes, and the grid cell a value
falls in: what the LoongFlow descriptor and island-row e2e tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.conftest import ROOT

DESCRIPTORS = """
[[descriptor]]
name = "smallest circle"
metric = "min_radius"
range = [0.0, 0.01]
bins = 4

[[descriptor]]
name = "program size"
metric = "length"
range = [2000, 5000]
bins = 3
"""


def task_with(tmp_path: Path, extra: str = DESCRIPTORS) -> Path:
    """A copy of circle_packing in tmp_path whose task.toml ends with `extra`."""
    folder = tmp_path / "circle_packing"
    shutil.copytree(ROOT / "tasks" / "circle_packing", folder)
    (folder / "task.toml").write_text((folder / "task.toml").read_text() + extra)
    return folder


def cell(value, lo, hi, bins) -> int:
    """The bin of `value` on an axis over [lo, hi) cut into `bins` (None: the first)."""
    return 0 if value is None else max(0, min(bins - 1, int((value - lo) / (hi - lo) * bins)))
