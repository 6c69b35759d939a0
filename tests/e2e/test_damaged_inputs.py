"""Damaged task files through the CLI: one line naming the file, exit 2, no traceback, no database."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from engine.resources import data_dir
from tests.e2e.conftest import FAST, ROOT, evotui

RULES = data_dir("tasks", "engine") / "rules"
CIRCLES = ROOT / "tasks" / "circle_packing"
BINARY = bytes(range(256)) * 4  # what a stray image or a truncated download looks like


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The whole of stderr is one `evotui: error:` line containing every needle."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evotui: error:"), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def refused(task: Path, db: Path, *needles: str) -> str:
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--max-proposals", "2", *FAST)
    assert proc.returncode == 2, proc.stderr
    line = one_line_error(proc, *needles)
    assert not db.exists() and not Path(f"{db}-wal").exists()
    return line


def copy_task(src: Path, tmp_path: Path) -> Path:
    task = tmp_path / src.name
    shutil.copytree(src, task, ignore=shutil.ignore_patterns("__pycache__"))
    return task


@pytest.mark.parametrize("file", ["seed_prompt.txt", "train.jsonl", "val.jsonl", "task.toml"])
def test_a_binary_prompt_task_file_is_named(tmp_path: Path, db: Path, file: str) -> None:
    task = copy_task(RULES, tmp_path)
    (task / file).write_bytes(BINARY)
    refused(task, db, str(task / file), "not UTF-8")


def test_a_binary_component_file_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    toml = (task / "task.toml").read_text().replace('seed_prompt = "seed_prompt.txt"\n', "")
    assert "seed_prompt" not in toml  # the edit took: the component is the seed
    (task / "task.toml").write_text(toml + '\n[[component]]\nname = "rules"\nfile = "part.txt"\n')
    (task / "part.txt").write_bytes(BINARY)
    refused(task, db, str(task / "part.txt"), "component 'rules'", "not UTF-8")


def test_a_binary_initial_program_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(CIRCLES, tmp_path)
    (task / "initial_program.py").write_bytes(BINARY)
    refused(task, db, str(task / "initial_program.py"), "initial program", "not UTF-8")


def test_a_binary_openevolve_config_is_named(tmp_path: Path, db: Path) -> None:
    task = copy_task(CIRCLES, tmp_path)
    (task / "task.toml").unlink()  # OpenEvolve layout: initial_program.py + evaluator.py + config.yaml
    (task / "config.yaml").write_bytes(BINARY)
    refused(task, db, str(task / "config.yaml"), "not UTF-8")


def test_an_unknown_key_inside_metric_is_refused(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    toml = (task / "task.toml").read_text()
    assert "[metric]" in toml
    (task / "task.toml").write_text(toml.replace("[metric]\n", "[metric]\nfunktion = \"score\"\n"))
    refused(task, db, str(task / "task.toml"), "[metric]", "funktion", "allowed: file, function, range")


def test_an_unknown_key_inside_input_is_refused(tmp_path: Path, db: Path) -> None:
    task = copy_task(RULES, tmp_path)
    (task / "task.toml").write_text((task / "task.toml").read_text() + '\n[input]\ntemplat = "{input}"\n')
    refused(task, db, "[input]", "templat", "allowed: template")
