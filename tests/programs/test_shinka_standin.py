"""Unchanged ShinkaEvolve evaluators that call shinka.core.run_shinka_eval run in the sandbox
(folders written here in Shinka's format, not copies of its examples)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.sandbox import Sandbox, SandboxLimits
from tests.e2e.conftest import FAST, evotui, summary_of

INITIAL = '''
# EVOLVE-BLOCK-START
def guess(seed):
    return 0.25 + 0.0 * seed
# EVOLVE-BLOCK-END


def run_experiment(seed=1, scale=1.0, file_path=None):
    return {"value": guess(seed) * scale, "seed": seed, "file": file_path}
'''

EVALUATE = '''
import argparse
from shinka.core import run_shinka_eval


def get_experiment_kwargs(run_idx):
    return {"seed": run_idx, "scale": 1.0 + run_idx}


def validate_fn(result):
    if not isinstance(result, dict) or "value" not in result:
        return False, "no value"
    return (True, None) if result["value"] >= 0 else (False, "negative value")


def aggregate_metrics_fn(results):
    values = [r["value"] for r in results]
    return {"combined_score": sum(values) / len(values), "public": {"runs": len(values)},
            "private": {"files": sorted({r["file"] for r in results})}, "text_feedback": f"values {values}"}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--program_path")
    p.add_argument("--results_dir")
    a = p.parse_args()
    metrics, correct, err = run_shinka_eval(
        program_path=a.program_path, results_dir=a.results_dir, experiment_fn_name="run_experiment",
        num_runs=3, get_experiment_kwargs=get_experiment_kwargs, aggregate_metrics_fn=aggregate_metrics_fn,
        validate_fn=validate_fn)
'''


def _folder(tmp_path: Path, evaluate: str = EVALUATE, initial: str = INITIAL) -> Path:
    folder = tmp_path / "shinka_task"
    folder.mkdir()
    (folder / "initial.py").write_text(initial)
    (folder / "evaluate.py").write_text(evaluate)
    return folder


def _evaluate(tmp_path: Path, folder: Path, program: str):
    sandbox = Sandbox(SandboxLimits(wall_s=60), scratch_root=tmp_path)
    return asyncio.run(sandbox.evaluate(folder / "evaluate.py", program, mode="shinka"))


def test_run_shinka_eval_runs_aggregates_validates_and_writes_its_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    res = _evaluate(tmp_path, folder, INITIAL)
    assert res.ok, res.reason
    # three runs with scale 1, 2, 3: mean of 0.25, 0.5, 0.75
    assert abs(res.score - 0.5) < 1e-9
    assert res.metrics["num_valid_runs"] == 3.0 and res.metrics["num_invalid_runs"] == 0.0
    assert res.metrics["runs"] == 3.0 and "execution_time_mean" in res.metrics
    assert res.feedback["text_feedback"] == "values [0.25, 0.5, 0.75]"


def test_a_failed_validation_marks_the_program_incorrect(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    res = _evaluate(tmp_path, folder, INITIAL.replace("return 0.25 + 0.0 * seed", "return -1.0"))
    assert not res.ok and "Validation failed: negative value" in res.reason


def test_a_crashing_candidate_gets_the_default_error_metrics(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    res = _evaluate(tmp_path, folder, INITIAL.replace("return 0.25 + 0.0 * seed", "return 1 / 0"))
    assert not res.ok and "division by zero" in res.reason


def test_other_shinka_imports_are_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path, evaluate="import shinka.llm\n" + EVALUATE)
    res = _evaluate(tmp_path, folder, INITIAL)
    assert not res.ok and "imports shinka.llm" in res.reason and "run_shinka_eval" in res.reason


def test_a_shinka_folder_evolves_through_the_cli(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "s.db"), "--max-proposals", "6", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["status"] == "completed" and abs(s["seed_score"] - 0.5) < 1e-9
