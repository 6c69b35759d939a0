"""A non-editable install (a wheel) has no top-level tasks/ or themes/: setup.py bundles them.

The packages are built with setup.py's own build_py (what a wheel contains, without needing
network or the wheel package) into a temporary directory, which then stands in for
site-packages, away from the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import ROOT, summary_of

PROBE = """
import sys
from pathlib import Path
import engine, evotui.tui.app as app
from engine.tasks.prompt_task import BUILTIN_DIR, resolve_task_path
from evotui.tui.themes import THEMES_DIR, load_themes
site = Path(sys.argv[1]).resolve()
assert Path(engine.__file__).resolve().is_relative_to(site), engine.__file__
assert BUILTIN_DIR == site / "engine" / "_bundled" / "tasks", BUILTIN_DIR
assert resolve_task_path("rules").is_relative_to(BUILTIN_DIR)
assert resolve_task_path("circle_packing").is_relative_to(BUILTIN_DIR)
themes, problems = load_themes()
assert THEMES_DIR.is_relative_to(site) and len(themes) == 3 and problems == [], (THEMES_DIR, problems)
assert (Path(app.__file__).parent / app.EvoApp.CSS_PATH).is_file()
print("ok")
"""


def build_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return site


def test_a_built_package_ships_tasks_themes_and_styles(tmp_path: Path) -> None:
    site = build_site(tmp_path)
    assert not (site / "tasks").exists() and not (site / "themes").exists()  # nothing generic at top level
    assert not list((site / "engine" / "_bundled").rglob("__pycache__")), "build caches are not shipped"
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", PROBE, str(site)], cwd=work, env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0 and probe.stdout.strip() == "ok", probe.stderr[-2000:]
    # The README's main job, from the built package alone.
    run = subprocess.run([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--max-proposals", "2",
                          "--time-scale", "2000", "--quiet", "--db", str(tmp_path / "runs.db")],
                         cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert summary_of(run)["status"] == "completed"
