"""A seed that fails its evaluator (issue 35, item 5): as OpenEvolve and ShinkaEvolve do, it is
generation 0 with score 0 and the run goes on, unless the task says `seed_must_pass`."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.conftest import FAST, ROOT, evotui, read_rows, summary_of


def _task(tmp_path: Path, extra: str = "") -> Path:
    folder = tmp_path / "task"
    shutil.copytree(ROOT / "tasks" / "circle_packing", folder)
    program = folder / "initial_program.py"
    # A seed whose packing overlaps: the evaluator raises on it (an incorrect program, not a broken sandbox).
    program.write_text(program.read_text().replace("def run_packing():", "def run_packing():\n    raise ValueError('seed is broken')", 1))
    if extra:
        toml = folder / "task.toml"
        toml.write_text(toml.read_text().replace("[program]", "[program]\n" + extra, 1))
    return folder


def test_a_failing_seed_scores_zero_and_the_run_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = evotui("run", str(_task(tmp_path)), "--no-ui", "--db", str(db), "--max-proposals", "6", *FAST)
    assert proc.returncode == 0, proc.stderr
    s = summary_of(proc)
    assert s["seed_score"] == 0.0 and "seed is broken" in s["seed_failed"], s
    assert s["proposal_attempts"] == 6
    assert "the seed failed its evaluator" in proc.stderr
    (meta,) = read_rows(db, "SELECT meta_json FROM artifacts WHERE status = 'seed'")[0]
    assert "seed_failed" in meta


def test_seed_must_pass_stops_before_any_llm_call(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    proc = evotui("run", str(_task(tmp_path, "seed_must_pass = true")), "--no-ui", "--db", str(db),
                  "--max-proposals", "6", *FAST)
    assert proc.returncode == 2, proc.stderr
    assert "the initial program fails its evaluator" in proc.stderr and "seed is broken" in proc.stderr
    assert read_rows(db, "SELECT count(*) FROM llm_calls") == [(0,)]
