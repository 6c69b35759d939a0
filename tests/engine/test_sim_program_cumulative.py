"""The simulated program model improves programs cumulatively: evolution beats best-of-N.

Issue 34: a task whose evolution does not beat best-of-N at equal proposals tests nothing. On the
old model heilbronn's did not (bench and this loop alike): every edit moved a random literal,
whatever the request showed. The model now edits the items the evaluator's feedback names
("points (4, 8, 10)", engine/llm/sim/blamed_items.py), so each fix exposes the next bottleneck,
which a proposal from the seed never sees (engine/llm/sim/README.md, "Program tasks").

The loop below (heilbronn) is a small evolution with the engine's own prompt builder and patch
applier: the parent is the best program so far (else, 30% of the time, a random one), the two best
others are shown with their scores, the parent's evaluator feedback is shown. Best-of-N asks the
same number of times from the seed with its own feedback. Fixed seeds, in-process evaluators, no
clock: deterministic.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import warnings
from pathlib import Path

import pytest

from engine.code.patches import apply_reply
from engine.llm.sim import blamed_items, program_model
from engine.stages import program_prompt

TASKS = Path(__file__).resolve().parents[2] / "tasks"
STEPS = 30
SEEDS = range(12)


class _Scorer:
    """combined_score and feedback of a program by the task's own evaluator (cached by text)."""

    def __init__(self, task: str, tmp: Path) -> None:
        spec = importlib.util.spec_from_file_location(f"evaluator_{task}", TASKS / task / "evaluator.py")
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.tmp, self.seen = tmp, {}

    def __call__(self, code: str) -> tuple[float, str]:
        if code not in self.seen:
            path = self.tmp / f"candidate_{len(self.seen)}.py"
            path.write_text(code)
            try:
                with warnings.catch_warnings(), __import__("numpy").errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    got = self.module.evaluate(str(path))
                self.seen[code] = (float(got["combined_score"]), str(got.get("feedback", "")))
            except Exception as exc:  # a candidate that crashes scores 0, as in a run
                self.seen[code] = (0.0, f"error: {exc}")
        return self.seen[code]


def _child(parent: str, score: float, feedback: str, others: list[tuple[float, str]],
           rng: random.Random) -> str | None:
    messages = program_prompt.build_messages(
        system=program_prompt.system_message("", "diff"), description="Maximise combined_score.",
        parent_id="p", parent_code=parent, parent_score=score, metrics={}, feedback={"feedback": feedback},
        last_change="", others=[(f"o{k}", s, c) for k, (s, c) in enumerate(others)], failures=[],
        fmt="diff", max_chars=20000)
    reply = program_model.propose(messages, lambda c: c, rng)
    result = apply_reply(parent, reply, "diff")
    return result.text if result.ok and result.text != parent else None


def _evolution(seed_code: str, scorer: _Scorer, rng: random.Random) -> float:
    pool = [(scorer(seed_code)[0], seed_code)]
    for _ in range(STEPS):
        pool.sort(key=lambda p: -p[0])
        score, parent = pool[0] if rng.random() < 0.7 else rng.choice(pool)
        others = [p for p in pool if p[1] != parent][:2]
        child = _child(parent, score, scorer(parent)[1], others, rng)
        if child is not None and all(child != p[1] for p in pool):
            pool.append((scorer(child)[0], child))
    return max(s for s, _ in pool)


def _best_of_n(seed_code: str, scorer: _Scorer, rng: random.Random) -> float:
    score, feedback = scorer(seed_code)
    best = score
    for _ in range(STEPS):
        child = _child(seed_code, score, feedback, [], rng)
        if child is not None:
            best = max(best, scorer(child)[0])
    return best


def test_evolution_beats_best_of_n_at_equal_proposals(tmp_path: Path) -> None:
    seed_code = (TASKS / "heilbronn" / "initial_program.py").read_text()
    scorer = _Scorer("heilbronn", tmp_path)
    diffs = [_evolution(seed_code, scorer, random.Random(s)) - _best_of_n(seed_code, scorer, random.Random(1000 + s))
             for s in SEEDS]
    wins = sum(d > 0 for d in diffs)
    # measured: this model +0.024, 10 of 12 seeds (+0.025 +- 0.007, 19 of 24 over seeds 0-23); the
    # old model, blind to the feedback: -0.011, 4 of 12 (-0.005 +- 0.007, 9 of 24).
    assert statistics.mean(diffs) > 0.01 and wins >= 9, (statistics.mean(diffs), wins, diffs)


HEILBRONN_FEEDBACK = "- feedback: smallest triangle is points (4, 8, 10) with area 0.00080"


def test_feedback_names_items_of_the_program_table() -> None:
    assert blamed_items.blamed_indices(HEILBRONN_FEEDBACK) == [4, 8, 10]
    assert blamed_items.blamed_indices("circles 3 and 7 overlap by 0.01; circle 12 sticks out") == [3, 7, 12]
    assert blamed_items.blamed_indices("Pack 26 circles; place 11 points in the square") == []
    assert blamed_items.blamed_indices("```python\n# points (1, 2)\n```") == []  # code is not feedback
    lines = (TASKS / "heilbronn" / "initial_program.py").read_text().splitlines()
    table = blamed_items.item_table(lines, list(range(len(lines))), "#")
    assert [lines[i].strip() for i in table][:2] == ["(0.10, 0.12),", "(0.50, 0.09),"] and len(table) == 11
    rows = blamed_items.blamed_rows(lines, list(range(len(lines))), "#", HEILBRONN_FEEDBACK)
    assert [lines[i].strip() for i in rows] == ["(0.52, 0.47),", "(0.90, 0.88),", "(0.72, 0.69),"]


def test_blamed_items_are_what_the_feedback_request_edits() -> None:
    code = (TASKS / "heilbronn" / "initial_program.py").read_text()
    request = f"## Current program (p, combined_score 0.0216)\n```python\n{code}```\n\n## Evaluator feedback\n{HEILBRONN_FEEDBACK}\n"
    blamed = {"(0.52, 0.47),", "(0.90, 0.88),", "(0.72, 0.69),"}
    hits = 0
    for seed in range(200):
        reason, edits = program_model.choose_edit(code, program_model.PYTHON, "diff", request, [], None, False,
                                                  random.Random(seed))
        if reason == "Move the items the feedback names.":
            assert {old.strip() for old, _ in edits} <= blamed
            hits += 1
    assert 0.35 * 200 < hits < 0.65 * 200  # P_BLAME = 0.5 of the replies that are not failure paths


def test_requests_naming_no_item_draw_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (TASKS / "circle_packing" / "initial_program.py").read_text()
    request = f"## Current program\n```python\n{code}```\n## Evaluator feedback\n- valid packing, 3 circle(s) small\n"

    def replies() -> list:
        return [program_model.choose_edit(code, program_model.PYTHON, "diff", request, [], None, False,
                                          random.Random(s)) for s in range(60)]

    monkeypatch.setattr(program_model, "P_BLAME", 1.0)
    always = replies()
    monkeypatch.setattr(program_model, "P_BLAME", 0.0)
    assert replies() == always  # circle_packing's grid has no item table: its replies are the old model's
