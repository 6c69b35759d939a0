"""Task folders: native, OpenEvolve and ShinkaEvolve formats, and folders in none of them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.tasks.loader import load_any_task
from engine.tasks.program_task import ProgramTask
from engine.tasks.prompt_task import PromptTask, TaskError

INITIAL = textwrap.dedent('''\
    """Maximise f(x) = -(x - 3)^2."""

    # EVOLVE-BLOCK-START
    def guess():
        return 0.5
    # EVOLVE-BLOCK-END


    def run():
        return guess()
    ''')

OE_EVALUATOR = textwrap.dedent('''\
    import importlib.util
    from openevolve.evaluation_result import EvaluationResult


    def _value(path):
        spec = importlib.util.spec_from_file_location("prog", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return float(mod.run())


    def evaluate_stage1(program_path):
        x = _value(program_path)
        return {"combined_score": 10.0 - (x - 3.0) ** 2, "stage1_ok": 1.0}


    def evaluate(program_path):
        x = _value(program_path)
        return EvaluationResult(metrics={"combined_score": 10.0 - (x - 3.0) ** 2, "x": x},
                                artifacts={"hint": f"x={x:.3f}; the optimum is elsewhere" })
    ''')

OE_CONFIG = textwrap.dedent('''\
    max_iterations: 25
    random_seed: 7
    diff_based_evolution: true
    llm:
      models:
        - name: gpt-4o
      temperature: 0.7
    prompt:
      system_message: "You optimise a single number."
      num_top_programs: 2
    database:
      population_size: 50
    evaluator:
      timeout: 20
      cascade_evaluation: false
      cascade_thresholds: [0.5, 0.8]
      parallel_evaluations: 2
    ''')

SHINKA_INITIAL = INITIAL.replace("def run():", "def run_experiment():").replace("return guess()", "return guess()")

SHINKA_EVALUATE = textwrap.dedent('''\
    """ShinkaEvolve contract: evaluate.py --program_path P --results_dir D writes metrics.json and correct.json."""
    import argparse
    import importlib.util
    import json
    import os


    def main(program_path, results_dir):
        spec = importlib.util.spec_from_file_location("prog", program_path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
            x = float(mod.run_experiment())
            correct, error = True, None
        except Exception as exc:
            x, correct, error = 0.0, False, str(exc)
        score = 10.0 - (x - 3.0) ** 2
        os.makedirs(results_dir, exist_ok=True)
        with open(os.path.join(results_dir, "metrics.json"), "w") as fh:
            json.dump({"combined_score": score, "public": {"x": x}, "private": {"secret_x": x},
                       "text_feedback": f"x is {x:.3f}"}, fh)
        with open(os.path.join(results_dir, "correct.json"), "w") as fh:
            json.dump({"correct": correct, "error": error}, fh)


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--program_path", required=True)
        parser.add_argument("--results_dir", required=True)
        args = parser.parse_args()
        main(args.program_path, args.results_dir)
    ''')


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def oe_folder(tmp_path) -> Path:
    return write(tmp_path / "oe_task", {"initial_program.py": INITIAL, "evaluator.py": OE_EVALUATOR, "config.yaml": OE_CONFIG})


@pytest.fixture
def shinka_folder(tmp_path) -> Path:
    return write(tmp_path / "shinka_task", {"initial.py": SHINKA_INITIAL, "evaluate.py": SHINKA_EVALUATE})


def test_builtin_tasks_load():
    for name in ("circle_packing", "heilbronn"):
        task = load_any_task(name)
        assert isinstance(task, ProgramTask) and task.format == "native" and task.evaluator.is_file()
    assert isinstance(load_any_task("rules"), PromptTask)


def test_openevolve_config_mapping(oe_folder):
    task = load_any_task(str(oe_folder))
    s = task.settings
    assert task.format == "openevolve" and task.description.startswith("Maximise")
    assert s.system_message == "You optimise a single number." and s.patch_format == "diff"
    assert s.eval_timeout_s == 20 and s.cascade is False and s.cascade_thresholds == [0.5, 0.8]
    assert s.eval_concurrency == 2 and s.num_top == 2
    # llm.temperature is honoured; the model needs an api_base to mean anything (a note says so).
    assert task.defaults == {"budget": {"max_proposals": 25}, "seed": 7, "task_llm": {"temperature": 0.7}}
    assert len(task.warnings) == 2
    assert "'gpt-4o' but no api_base" in task.warnings[0] and "database.population_size" in task.warnings[1]


def test_openevolve_full_rewrite_mapping(oe_folder):
    (oe_folder / "config.yaml").write_text("diff_based_evolution: false\n")
    assert load_any_task(str(oe_folder)).settings.patch_format == "full"


def test_shinka_folder(shinka_folder):
    task = load_any_task(str(shinka_folder))
    assert task.format == "shinka" and task.sandbox_mode == "shinka"


def test_folder_in_no_format(tmp_path):
    folder = write(tmp_path / "junk", {"main.py": "x = 1\n", "notes.txt": ""})
    with pytest.raises(TaskError) as err:
        load_any_task(str(folder))
    msg = str(err.value)
    assert "initial_program.py + evaluator.py" in msg and "initial.py + evaluate.py" in msg and "task.toml" in msg
    assert "main.py" in msg


def test_evaluator_without_evaluate(tmp_path):
    folder = write(tmp_path / "t", {"initial_program.py": INITIAL, "evaluator.py": "def score(p):\n    return 1\n"})
    with pytest.raises(TaskError, match="no top-level evaluate"):
        load_any_task(str(folder))


def test_native_missing_evaluator(tmp_path):
    folder = write(tmp_path / "t", {"task.toml": 'kind = "program"\n', "initial_program.py": INITIAL})
    with pytest.raises(TaskError, match="evaluator file not found"):
        load_any_task(str(folder))


def test_native_unknown_program_key(tmp_path):
    folder = write(tmp_path / "t", {"task.toml": 'kind = "program"\n[program]\npatch_fmt = "diff"\n',
                                    "initial_program.py": INITIAL, "evaluator.py": OE_EVALUATOR})
    with pytest.raises(TaskError, match="patch_fmt"):
        load_any_task(str(folder))


def test_bad_markers_in_initial_program(tmp_path):
    folder = write(tmp_path / "t", {"initial_program.py": "# EVOLVE-BLOCK-START\nx = 1\n", "evaluator.py": OE_EVALUATOR})
    with pytest.raises(TaskError, match="EVOLVE-BLOCK-START without"):
        load_any_task(str(folder))
