"""`evotui runs` keeps its columns aligned whatever the task names (D15): every column starts
where its heading does. The CLI's --help names programs as well as prompts."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from evotui.commands.inspect import _runs

ROOT = Path(__file__).resolve().parents[2]


class ListingStore:
    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    async def list_runs(self) -> list[dict]:
        return self.rows


def row(run_id: str, task: str) -> dict:
    return {"run_id": run_id, "task": task, "status": "completed", "mode": "async", "policy": "guarded",
            "pool_version": 12, "created_at": 1_700_000_000, "summary": {"seed_score": 0.1, "best_score": 0.5}}


async def test_long_task_names_do_not_shift_the_columns(capsys):
    rows = [row("r20260101-120000-abcd", "rules"), row("r20260101-130000-efgh", "circle_packing_with_a_long_name")]
    assert await _runs(ListingStore(rows), argparse.Namespace(json=False, db="x.db")) == 0
    head, *lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for column, value in (("status", "completed"), ("mode", "async"), ("policy", "guarded"), ("created", "20")):
        starts = {line.index(value, len("r20260101-120000-abcd ") + 5) for line in lines}
        assert starts == {head.index(column)}, (column, head, lines)


def test_help_names_programs_and_prompts():
    out = subprocess.run([sys.executable, "-m", "evotui.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "evolution of programs and prompts" in out.stdout


def test_show_names_a_program_as_a_program(tmp_path):
    """issue 38, D15: `show` said "best prompt:" for a program task."""
    db = tmp_path / "p.db"
    root = Path(__file__).resolve().parents[2]
    run = [sys.executable, "-m", "evotui.cli", "run", "circle_packing", "--no-ui", "--quiet", "--db", str(db),
           "--max-proposals", "2", "--time-scale", "2000"]
    assert subprocess.run(run, cwd=root, capture_output=True, text=True, timeout=300).returncode == 0
    shown = subprocess.run([sys.executable, "-m", "evotui.cli", "show", "--db", str(db)], cwd=root,
                           capture_output=True, text=True, timeout=120)
    assert "\nbest program:\n" in shown.stdout and "best prompt:" not in shown.stdout
