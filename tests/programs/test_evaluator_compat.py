"""OpenEvolve-compatible evaluator results: numeric strings as scores, no cascade line without a
cascade, and a warning when the evaluator swallows an ImportError (issue 19 item 4)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.sandbox import Sandbox, SandboxLimits

PROGRAM = "def f():\n    return 1\n"


def _run(tmp_path: Path, evaluator: str, **kw):
    ev = tmp_path / "evaluator.py"
    ev.write_text(evaluator)
    sandbox = Sandbox(SandboxLimits(wall_s=60), scratch_root=tmp_path)
    return asyncio.run(sandbox.evaluate(ev, PROGRAM, mode="openevolve", **kw))


def test_a_numeric_string_score_is_a_score(tmp_path: Path) -> None:
    res = _run(tmp_path, "def evaluate(p):\n    return {'combined_score': '0.9', 'note': 'fine'}\n")
    assert res.ok and res.score == 0.9
    assert res.feedback["note"] == "fine"


def test_no_cascade_line_without_a_cascade(tmp_path: Path) -> None:
    res = _run(tmp_path, "def evaluate(p):\n    return {'combined_score': 0.1}\n", cascade=False,
               thresholds=[0.5])
    assert res.ok and res.score == 0.1 and "cascade" not in res.feedback


def test_a_cascade_still_stops_below_its_threshold(tmp_path: Path) -> None:
    evaluator = ("def evaluate_stage1(p):\n    return {'combined_score': 0.1}\n"
                 "def evaluate_stage2(p):\n    return {'combined_score': 0.9}\n"
                 "def evaluate(p):\n    return {'combined_score': 0.9}\n")
    res = _run(tmp_path, evaluator, cascade=True, thresholds=[0.5])
    assert res.ok and res.score == 0.1 and "stopped after evaluate_stage1" in res.feedback["cascade"]


def test_a_swallowed_import_error_is_warned_about(tmp_path: Path) -> None:
    evaluator = ("def evaluate(p):\n    try:\n        import no_such_solver_module\n"
                 "    except ImportError:\n        return {'combined_score': 0.0}\n"
                 "    return {'combined_score': 1.0}\n")
    res = _run(tmp_path, evaluator)
    assert res.ok and res.score == 0.0
    assert any("no_such_solver_module" in w and "missing module" in w for w in res.warnings)
    clean = _run(tmp_path, "import json\ndef evaluate(p):\n    return {'combined_score': 1.0}\n")
    assert clean.ok and not any("import failed" in w for w in clean.warnings)


def test_an_async_evaluate_is_awaited(tmp_path: Path) -> None:
    res = _run(tmp_path, "import asyncio\nasync def evaluate(p):\n    await asyncio.sleep(0)\n"
                         "    return {'combined_score': 0.7}\n")
    assert res.ok and res.score == 0.7
