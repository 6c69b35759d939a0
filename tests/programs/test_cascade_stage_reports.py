"""Cascade stages reported as they end (engine/sandbox_support/evotui_sandbox_runner.py): a stage
that passes with stages still to run reaches the engine while the next one is still running, so
speculation can act on its score; nothing else is reported early."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.sandbox import Sandbox, SandboxLimits, channel

PROGRAM = "def f():\n    return 1\n"

# Stage 2 waits for a file the test writes only after it has seen stage 1's report: the
# evaluation can only finish if the report arrived while stage 2 was running.
WAITING = """
import os, time
def evaluate_stage1(p):
    return {"combined_score": 0.4, "quick": 1.0}
def evaluate_stage2(p):
    gate = os.path.join(os.path.dirname(os.path.abspath(__file__)), "go")
    for _ in range(3000):
        if os.path.exists(gate):
            return {"combined_score": 0.8}
        time.sleep(0.01)
    return {"combined_score": -1.0}
def evaluate_stage3(p):
    return {"combined_score": 0.9}
"""


def _sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(SandboxLimits(wall_s=60, candidate_process=False), scratch_root=tmp_path)


def test_a_passed_stage_is_reported_while_the_next_one_runs(tmp_path: Path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "evaluator.py").write_text(WAITING)
    seen: list[dict] = []

    def on_stage(stage: dict) -> None:
        seen.append(stage)
        if stage["index"] == 0:
            (task / "go").write_text("")

    res = asyncio.run(_sandbox(tmp_path).evaluate(task / "evaluator.py", PROGRAM, cascade=True,
                                                  thresholds=[0.1, 0.1], on_stage=on_stage))
    assert res.ok and res.score == 0.9
    # Stages 1 and 2 passed with more to run; the last one's score is the result, not a report.
    assert [(s["name"], s["score"], s["index"], s["of"]) for s in seen] == [
        ("evaluate_stage1", 0.4, 0, 3), ("evaluate_stage2", 0.8, 1, 3)]
    assert [s["name"] for s in res.stages] == ["evaluate_stage1", "evaluate_stage2", "evaluate_stage3"]


def test_a_stage_below_its_threshold_is_not_reported(tmp_path: Path) -> None:
    ev = tmp_path / "evaluator.py"
    ev.write_text("def evaluate_stage1(p):\n    return {'combined_score': 0.1}\n"
                  "def evaluate_stage2(p):\n    return {'combined_score': 0.9}\n")
    seen: list[dict] = []
    res = asyncio.run(_sandbox(tmp_path).evaluate(ev, PROGRAM, cascade=True, thresholds=[0.5],
                                                  on_stage=seen.append))
    assert res.ok and res.score == 0.1 and seen == []


def test_no_cascade_reports_nothing(tmp_path: Path) -> None:
    ev = tmp_path / "evaluator.py"
    ev.write_text("def evaluate_stage1(p):\n    return {'combined_score': 0.3}\n"
                  "def evaluate(p):\n    return {'combined_score': 0.7}\n")
    seen: list[dict] = []
    res = asyncio.run(_sandbox(tmp_path).evaluate(ev, PROGRAM, cascade=False, on_stage=seen.append))
    assert res.ok and res.score == 0.7 and seen == []


def test_stage_lines_need_this_evaluations_nonce() -> None:
    line = b'{"nonce": "abc", "stage": {"name": "s1", "score": 0.5, "index": 0, "of": 2}}'
    assert channel.stage_line(line, "abc") == {"name": "s1", "score": 0.5, "index": 0, "of": 2}
    assert channel.stage_line(line, "abd") is None
    assert channel.stage_line(b'{"nonce": "abc", "stage": {"score": NaN, "index": 0, "of": 2}}', "abc") is None
    assert channel.stage_line(b'{"nonce": "abc", "result": {}}', "abc") is None
    assert channel.stage_line(b"garbage", "abc") is None
