"""The simulated program model improves programs cumulatively: evolution beats best-of-N.

Issue 34: a task whose evolution does not beat best-of-N at equal proposals tests nothing. On the
old model it did not (circle_packing and heilbronn, bench and this loop alike): every edit was a
random move of a random literal, whatever the request showed. The model now reads what the
request shows, as an LLM does (engine/llm/sim/README.md, "Program tasks"):
- feedback naming items ("points (4, 8, 10)") gets those items edited (blamed_items.py), so each
  fix exposes the next bottleneck, which a proposal from the seed never sees;
- scored programs shown beside the parent point the way to move a constant (directions.inferred);
- a setting is borrowed only from a program not scored below the parent.

The loop below (heilbronn) is a small evolution with the engine's own prompt builder and patch applier: the
parent is the best program so far (else, 30% of the time, a random one), the two best others are
shown with their scores, the parent's evaluator feedback is shown. Best-of-N asks the same number of
times from the seed with its own feedback. Fixed seeds, in-process evaluators, no clock: deterministic.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import warnings
from pathlib import Path

import pytest

from engine.code.patches import apply_reply
from engine.llm.sim import blamed_items, directions, program_model
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
    # measured: this model +0.043, 12 of 12 seeds (+0.038 +- 0.006, 23 of 24 over seeds 0-23); the
    # old model, blind to the request's scores and feedback: -0.011, 4 of 12 (-0.005 +- 0.007, 9 of 24).
    # circle_packing is not asserted: there the loop gives +0.034 +- 0.022 (14 of 24) against the old
    # model's +0.018 +- 0.020, within the noise (engine/llm/sim/README.md, "Program tasks").
    assert statistics.mean(diffs) > 0.02 and wins >= 10, (statistics.mean(diffs), wins, diffs)


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


PARENT = "x = 1\n# EVOLVE-BLOCK-START\ndef f():\n    step = 0.25\n    width = 2.0\n    return step * width\n# EVOLVE-BLOCK-END\n"


def test_scored_programs_point_the_way() -> None:
    better = PARENT.replace("step = 0.25", "step = 0.3")
    worse = PARENT.replace("width = 2.0", "width = 2.5")
    request = (f"### Program a (combined_score 0.9)\n```python\n{better}```\n"
               f"### Program b (Score: 0.1)\n```python\n{worse}```\n"
               f"## Current program (p, combined_score 0.5)\n```python\n{PARENT}```\n")
    assert directions.parent_score(request, PARENT) == 0.5
    assert [s for s, _ in directions.scored_blocks(request)] == [0.9, 0.1, 0.5]
    # step: the better program has more -> up; width: the worse program has more -> down
    assert directions.inferred(PARENT, 0.5, directions.scored_blocks(request)[:2]) == [(3, 0, True), (4, 0, False)]
    # OpenEvolve states the current program's metrics, not in its heading
    assert directions.parent_score("- combined_score: 0.4200\n# Current Program\n```python\nx\n```", "x\n") == 0.42
    assert directions.inferred(PARENT, None, directions.scored_blocks(request)) == []
    tied = [(0.5, better)]
    assert directions.inferred(PARENT, 0.5, tied) == []


def test_borrowing_skips_programs_scored_below_the_parent() -> None:
    worse = PARENT.replace("width = 2.0", "width = 9.5")
    request = (f"### Program b (combined_score 0.1)\n```python\n{worse}```\n"
               f"## Current program (p, combined_score 0.5)\n```python\n{PARENT}```\n")
    for seed in range(300):
        _, edits = program_model.choose_edit(PARENT, program_model.PYTHON, "diff", request, [worse], None, False,
                                             random.Random(seed))
        assert not (isinstance(edits, list) and any("9.5" in new for _, new in edits)), seed
    unscored = request.replace("combined_score 0.1", "no score").replace("combined_score 0.5", "no score")
    copied = sum(isinstance(e, list) and any("9.5" in new for _, new in e)
                 for e in (program_model.choose_edit(PARENT, program_model.PYTHON, "diff", unscored, [worse], None,
                                                     False, random.Random(s))[1] for s in range(300)))
    assert copied > 20  # without scores it borrows from any program shown, as before


def test_requests_without_scores_or_named_items_draw_nothing_new(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (TASKS / "circle_packing" / "initial_program.py").read_text()
    request = f"## Current program\n```python\n{code}```\n## Evaluator feedback\n- valid packing, 3 circle(s) small\n"

    def replies() -> list:
        return [program_model.choose_edit(code, program_model.PYTHON, "diff", request, [], None, False,
                                          random.Random(s)) for s in range(60)]

    monkeypatch.setattr(program_model, "P_BLAME", 1.0)
    monkeypatch.setattr(program_model, "P_INFER", 1.0)
    always = replies()
    monkeypatch.setattr(program_model, "P_BLAME", 0.0)
    monkeypatch.setattr(program_model, "P_INFER", 0.0)
    assert replies() == always


def test_perturbations_change_values_and_skip_quoted_numbers() -> None:
    for seed in range(300):
        assert float(program_model._perturb_number("0.1", random.Random(seed))) != 0.1
    assert [m.group(0) for m in program_model._literals('    """Place 26 centres."""')] == []
    assert [m.group(0) for m in program_model._literals('s = "a 3" + str(4)')] == ["4"]
