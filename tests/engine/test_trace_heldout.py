"""The held-out check: its labels and thresholds, the circle-packing held-out evaluator catching
what evaluator.py lets through, and the task declarations ([heldout] evaluator, heldout split)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError
from engine.trace.analyze.heldout import label

ROOT = Path(__file__).resolve().parents[2]
CP = ROOT / "tasks" / "circle_packing"


def _evaluate(evaluator: Path, program: Path) -> dict:
    """The evaluator's dict, in a child process: a candidate that patches numpy patches only it."""
    code = ("import importlib.util, json, sys\n"
            "spec = importlib.util.spec_from_file_location('ev', sys.argv[1])\n"
            "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            "print(json.dumps(mod.evaluate(sys.argv[2])))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(evaluator), str(program)], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(proc.stdout)


@pytest.mark.parametrize(("public", "heldout", "expected"), [
    (0.4, 0.4, "aligned"), (0.4, 0.2, "aligned"), (0.4, 0.19, "mild overfit"), (0.4, 0.0, "mild overfit"),
    (0.4, -0.01, "severe overfit"), (0.4, None, "severe overfit"), (0.0, 0.3, "no gain"), (-0.1, -0.2, "no gain"),
])
def test_labels(public: float, heldout: float | None, expected: str) -> None:
    assert label(public, heldout) == expected


SEED = (CP / "initial_program.py").read_text()
INFLATED = SEED.replace("    return centers, radii\n\n\ndef compute_max_radii",
                        "    return centers, radii + 4e-10\n\n\ndef compute_max_radii")
PATCHED = SEED.replace("    radii = compute_max_radii(centers)\n",
                       "    radii = compute_max_radii(centers) * 1.5\n    np.sqrt = lambda x: x * 0 + 10.0\n"
                       "    np.min = lambda a: 0.0\n    np.max = lambda a: 1.0\n")
UNSEEDED = SEED.replace("    stagger = 0.0\n", "    stagger = float(np.random.default_rng().uniform(0, 1e-3))\n")


@pytest.mark.parametrize("program", [INFLATED, PATCHED, UNSEEDED], ids=["inflated", "numpy-patched", "unseeded"])
def test_the_heldout_evaluator_fails_what_the_evaluator_lets_through(tmp_path: Path, program: str) -> None:
    assert program != SEED
    path = tmp_path / "program.py"
    path.write_text(program)
    assert _evaluate(CP / "evaluator.py", path)["validity"] == 1.0  # the run's evaluator accepts it
    out = _evaluate(CP / "heldout_evaluator.py", path)
    assert out["validity"] == 0.0 and out["combined_score"] == 0.0, out


def test_the_seed_scores_the_same_on_both(tmp_path: Path) -> None:
    path = tmp_path / "program.py"
    path.write_text(SEED)
    held = _evaluate(CP / "heldout_evaluator.py", path)["combined_score"]
    assert held == pytest.approx(_evaluate(CP / "evaluator.py", path)["combined_score"], abs=1e-12)


def test_program_task_declarations(tmp_path: Path) -> None:
    assert load_any_task(str(CP)).heldout_evaluator == (CP / "heldout_evaluator.py").resolve()
    task = tmp_path / "cp"
    shutil.copytree(CP, task)
    (task / "heldout_evaluator.py").unlink()
    assert load_any_task(str(task)).heldout_evaluator is None
    (task / "strict.py").write_text((CP / "heldout_evaluator.py").read_text())
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml + '\n[heldout]\nevaluator = "strict.py"\n')
    assert load_any_task(str(task)).heldout_evaluator == (task / "strict.py").resolve()
    (task / "task.toml").write_text(toml + '\n[heldout]\nevaluator = "missing.py"\n')
    with pytest.raises(TaskError, match="missing.py"):
        load_any_task(str(task))
    (task / "task.toml").write_text(toml + '\n[heldout]\nfile = "strict.py"\n')
    with pytest.raises(TaskError, match=r"\[heldout\] takes one key"):
        load_any_task(str(task))


def test_prompt_task_declarations(tmp_path: Path) -> None:
    rules = load_any_task("rules")
    assert len(rules.heldout) == 30 and not {e["id"] for e in rules.heldout} & set(rules.train_ids + rules.val_ids)
    task = tmp_path / "rules"
    shutil.copytree(ROOT / "tasks" / "rules", task)
    (task / "heldout.jsonl").unlink()
    assert load_any_task(str(task)).heldout == []
    shutil.copy(task / "val.jsonl", task / "leaky.jsonl")
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text('heldout = "leaky.jsonl"\n' + toml)
    with pytest.raises(TaskError, match="also in train or val"):
        load_any_task(str(task))
    (task / "task.toml").write_text('heldout = "nope.jsonl"\n' + toml)
    with pytest.raises(TaskError, match="nope.jsonl"):
        load_any_task(str(task))
