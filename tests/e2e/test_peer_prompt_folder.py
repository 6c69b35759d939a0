"""OpenEvolve's prompt-optimisation folder format runs unchanged (issue 35, item 6):
initial_prompt.txt + evaluator.py + config.yaml with `language: "text"`, which evotui refused
as "not a task folder". The prompt is evolved whole; the evaluator scores the prompt file.
Offline here: the evaluator scores what the prompt asks for instead of calling a model on a
dataset (the example's own evaluator needs a hosted endpoint and Hugging Face downloads)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of

EVALUATOR = '''
def evaluate(prompt_path):
    text = open(prompt_path).read().lower()
    wants = ["step by step", "exactly one word", "example", "output format", "last line", "carefully"]
    return {"combined_score": sum(w in text for w in wants) / len(wants), "prompt_length": len(text)}
'''
CONFIG = '''max_iterations: 12
language: "text"
diff_based_evolution: false
prompt:
  template_dir: "templates"
evaluator:
  timeout: 60
  max_retries: 3
  cascade_evaluation: false
'''


def test_an_openevolve_prompt_folder_runs_and_improves_in_12_proposals(tmp_path: Path) -> None:
    folder = tmp_path / "llm_prompt_optimization"
    (folder / "templates").mkdir(parents=True)
    (folder / "initial_prompt.txt").write_text("Classify the sentiment of the review as positive or negative.\n")
    (folder / "evaluator.py").write_text(EVALUATOR)
    (folder / "config.yaml").write_text(CONFIG)
    db = tmp_path / "r.db"
    proc = evotui("run", str(folder), "--llm", "sim", "--no-ui", "--seed", "3", "--db", str(db), *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["proposal_attempts"] == 12  # max_iterations
    assert s["seed_score"] == 0.0 and s["best_score"] > s["seed_score"], s
    shown = evotui("show", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    best = shown.stdout.split("best program:", 1)[1]
    assert best.lstrip().startswith("Classify the sentiment of the review"), best
