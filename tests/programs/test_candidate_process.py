"""What an evaluator sees of a candidate that runs in its own process (evotui_candidate_guard.py):
the module behaves as an imported one for the ways evaluators use it, and the routes the guard
cannot redirect are refused, not silently run in the evaluator's process."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.isolation import detect

LOAD = """
import importlib.util
def load(p):
    spec = importlib.util.spec_from_file_location("candidate", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
"""


def run(tmp_path: Path, evaluator: str, program: str, files: dict[str, str] | None = None):
    task = tmp_path / "task"
    task.mkdir()
    (task / "evaluator.py").write_text(LOAD + textwrap.dedent(evaluator))
    for name, text in (files or {}).items():
        (task / name).write_text(textwrap.dedent(text))
    (tmp_path / "scratch").mkdir()
    sandbox = Sandbox(SandboxLimits(wall_s=60, memory_mb=1024), scratch_root=tmp_path / "scratch")
    return asyncio.run(sandbox.evaluate(task / "evaluator.py", textwrap.dedent(program)))


def test_values_exceptions_generators_and_signatures_cross_over(tmp_path):
    res = run(tmp_path, """
    import inspect, numpy as np
    def evaluate(p):
        mod = load(p)
        arr = mod.grid(3)
        assert isinstance(arr, np.ndarray) and arr.shape == (3, 3) and mod.N == 7
        assert list(mod.count(4)) == [0, 1, 2, 3]
        assert list(inspect.signature(mod.grid).parameters) == ["n", "scale"]
        try:
            mod.fail()
        except ValueError as exc:
            caught = str(exc)
        obj = mod.Box(5)
        return {"combined_score": float(arr.sum()) + obj.value + len(obj.items()), "caught": caught}
    """, """
    import numpy as np
    N = 7
    def grid(n, scale=1.0):
        return np.ones((n, n)) * scale
    def count(k):
        yield from range(k)
    def fail():
        raise ValueError("no such move")
    class Box:
        def __init__(self, v):
            self.value = v
        def items(self):
            return [1, 2]
    """)
    assert res.ok, (res.reason, res.stderr_tail)
    assert res.score == 9 + 5 + 2 and res.feedback["caught"] == "no such move"


def test_task_folder_classes_come_back_as_the_evaluators_own(tmp_path):
    """ShinkaEvolve's game_2048: the candidate returns the task's Enum, which the evaluator compares."""
    res = run(tmp_path, """
    from moves import Action
    def evaluate(p):
        moves = load(p).play()
        ok = all(m in list(Action) for m in moves)
        return {"combined_score": float(ok and moves[0] is Action.UP)}
    """, """
    from moves import Action
    def play():
        return [Action.UP, Action.LEFT]
    """, files={"moves.py": """
    import enum
    class Action(enum.Enum):
        UP = 0
        LEFT = 1
    """})
    assert res.ok and res.score == 1.0, (res.reason, res.stderr_tail)


def test_an_unredirectable_route_is_refused_with_a_reason(tmp_path):
    res = run(tmp_path, """
    def evaluate(p):
        ns = {}
        exec(compile(open(p).read() + "\\nEXTRA = 1\\n", p, "exec"), ns)
        return {"combined_score": 1.0}
    """, "def f():\n    return 1\n")
    assert not res.ok and "by a route evotui cannot redirect" in res.reason, res.reason


def test_a_forked_worker_gets_a_candidate_process_of_its_own(tmp_path):
    res = run(tmp_path, """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    def evaluate(p):
        mod = load(p)
        first = mod.square(2)
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
            got = list(pool.map(mod.square, [3, 4]))
        return {"combined_score": float(first + sum(got))}
    """, "def square(x):\n    return x * x\n")
    assert res.ok and res.score == 4 + 9 + 16, (res.reason, res.stderr_tail)


def test_an_interrupted_call_stops_the_candidate_process(tmp_path):
    res = run(tmp_path, """
    import signal
    def evaluate(p):
        mod = load(p)
        def alarm(*_):
            raise TimeoutError("evaluator's own timeout")
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        try:
            mod.spin()
        except TimeoutError:
            pass
        try:
            mod.spin()
        except RuntimeError as exc:
            return {"combined_score": 1.0, "after": str(exc)}
        return {"combined_score": 0.0}
    """, "def spin():\n    while True:\n        pass\n")
    assert res.ok and res.score == 1.0, (res.reason, res.stderr_tail)
    assert "stopped after an interrupted call" in res.feedback["after"]


def test_the_candidate_writes_only_its_own_directory(tmp_path):
    if not detect().landlock:
        pytest.skip("the candidate's own write confinement needs Landlock")
    res = run(tmp_path, """
    import os, tempfile
    def evaluate(p):
        mine = os.path.join(tempfile.gettempdir(), "evaluator-note.txt")
        with open(mine, "w") as fh:
            fh.write("mine")
        return {"combined_score": 1.0, "got": load(p).attempt(mine)}
    """, """
    import os, tempfile
    def attempt(theirs):
        with open(os.path.join(tempfile.gettempdir(), "own.txt"), "w") as fh:
            fh.write("ok")
        try:
            with open(theirs, "w") as fh:
                fh.write("forged")
            return "wrote the evaluator's file"
        except OSError as exc:
            return type(exc).__name__
    """)
    assert res.ok and res.feedback["got"] == "PermissionError", (res.reason, res.feedback)
