"""evaluator.max_retries (issue 35, item 6): an evaluation whose evaluator raised runs again, up
to the retries the task allows, as OpenEvolve does; a timeout, a limit or an incorrect result is
never retried (it would only repeat)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.sandbox import EvalResult, Sandbox, SandboxLimits
from engine.tasks.program_task import load_program_task

RAISES = "def evaluate(program_path):\n    raise RuntimeError('flaky backend')\n"


def _oe_folder(tmp_path: Path, evaluator: str, config: str) -> Path:
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "initial_program.py").write_text("# EVOLVE-BLOCK-START\nX = 1.0\n# EVOLVE-BLOCK-END\n")
    (folder / "evaluator.py").write_text(evaluator)
    (folder / "config.yaml").write_text(config)
    return folder


def test_config_yaml_max_retries_becomes_the_sandbox_retries(tmp_path):
    folder = _oe_folder(tmp_path, RAISES, "evaluator:\n  max_retries: 2\n  cascade_evaluation: false\n")
    task = load_program_task(folder)
    assert task.settings.eval_retries == 2
    assert task.settings.limits().retries == 2
    assert not any("max_retries" in w for w in task.warnings), task.warnings


def test_an_evaluator_that_always_raises_runs_one_plus_retries_times(tmp_path):
    folder = _oe_folder(tmp_path, RAISES, "evaluator:\n  max_retries: 2\n  cascade_evaluation: false\n")
    task = load_program_task(folder)
    res = asyncio.run(Sandbox(task.settings.limits(), scratch_root=tmp_path).evaluate(
        task.evaluator, task.initial_program))
    assert not res.ok and res.kind == "exception" and "flaky backend" in res.reason, res.reason
    assert res.attempts == 3
    assert any("raised on 2 attempt(s)" in w and "retries allowed: 2" in w for w in res.warnings), res.warnings


def test_without_retries_an_exception_is_final(tmp_path):
    ev = tmp_path / "evaluator.py"
    ev.write_text(RAISES)
    res = asyncio.run(Sandbox(SandboxLimits(wall_s=10), scratch_root=tmp_path).evaluate(ev, "x = 1\n"))
    assert not res.ok and res.attempts == 1 and res.kind == "exception"


def test_a_timeout_is_not_retried(tmp_path):
    ev = tmp_path / "evaluator.py"
    ev.write_text("import time\ndef evaluate(p):\n    time.sleep(60)\n")
    res = asyncio.run(Sandbox(SandboxLimits(wall_s=1, retries=3), scratch_root=tmp_path).evaluate(ev, "x = 1\n"))
    assert res.timed_out and res.attempts == 1, res.reason


def _scripted(results: list[EvalResult]):
    calls: list[int] = []

    async def run(self, *args, **kwargs) -> EvalResult:
        calls.append(1)
        return results[len(calls) - 1]
    return run, calls


def test_a_raise_then_a_score_returns_the_score(tmp_path, monkeypatch):
    run, calls = _scripted([EvalResult(ok=False, kind="exception", reason="ConnectionError: reset"),
                            EvalResult(ok=True, score=0.7)])
    monkeypatch.setattr(Sandbox, "_run", run)
    res = asyncio.run(Sandbox(SandboxLimits(retries=3), scratch_root=tmp_path).evaluate(tmp_path / "e.py", "x"))
    assert res.ok and res.score == 0.7 and res.attempts == 2 and len(calls) == 2
    assert any("ConnectionError: reset" in w for w in res.warnings), res.warnings


def test_an_incorrect_program_is_not_retried(tmp_path, monkeypatch):
    run, calls = _scripted([EvalResult(ok=False, kind="incorrect", reason="incorrect: wrong answer"),
                            EvalResult(ok=True, score=1.0)])
    monkeypatch.setattr(Sandbox, "_run", run)
    res = asyncio.run(Sandbox(SandboxLimits(retries=3), scratch_root=tmp_path).evaluate(tmp_path / "e.py", "x"))
    assert not res.ok and len(calls) == 1 and res.attempts == 1
