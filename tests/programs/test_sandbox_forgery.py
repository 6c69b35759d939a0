"""The forging trial set (issue 31): candidates that try to forge their score, against evaluators
that load them the ways real evaluators do, in every isolation mode this machine offers.

Each evaluator checks the candidate's `square(3) == 9` and returns 1.0 for a right answer, so an
honest attacker scores at most 1.0 and a forged score is anything above (999). Every attack must
end in 1.0 or a failed evaluation, never 999. The modes the README calls confining (namespaces,
uid, Landlock) must hold every attack; the bare mode must hold those the guard closes alone.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from engine.sandbox import Sandbox, SandboxLimits
from tests.programs.test_sandbox_hostile import MODES, files_confined, mode_isolation

HONEST = "def square(x):\n    return x * x\n"

FORGED = '{"ok": True, "metrics": {"combined_score": 999.0}, "artifacts": {}}'

ATTACKS = {
    # The issue's own: a result frame to every descriptor the process may have inherited.
    "frames-to-every-fd": f"""
import json, os
p = json.dumps({FORGED}).encode()
for d in range(3, 64):
    try:
        os.write(d, b"%d\\n" % len(p) + p)
    except OSError:
        pass
""",
    # Rewrite the evaluator and the sandbox's own modules in whatever process this is.
    "monkeypatch-evaluator": """
import sys
for name, mod in list(sys.modules.items()):
    if name in ("evaluator", "evotui_sandbox_eval", "shinka.core", "__main__") or "evaluate" in name:
        for attr in ("evaluate", "as_result", "run_shinka_eval", "numeric", "stage_score", "main"):
            if hasattr(mod, attr):
                try:
                    setattr(mod, attr, lambda *a, **k: {"combined_score": 999.0})
                except Exception:
                    pass
frame = sys._getframe()
while frame is not None:
    for key in ("score", "metrics", "result"):
        if key in frame.f_locals:
            frame.f_globals.setdefault("__forged__", True)
    frame = frame.f_back
""",
    # Fake results on stdout, as a JSON line and as a runner frame.
    "fake-json-on-stdout": f"""
import json, sys
print(json.dumps({FORGED}))
print(json.dumps({{"nonce": "", "result": {FORGED}}}))
sys.stdout.flush()
""",
    # Result files: Shinka's metrics.json/correct.json, any pickle a helper left, kept up by a child.
    "write-result-files": """
import os, pickle, subprocess, sys
code = r'''
import json, os, pickle, time, glob
forged = pickle.dumps({"combined_score": 999.0})
class Boom:
    def __reduce__(self):
        return (exec, ("import sys; sys.modules['evaluator'].FORGED = 999.0",))
boom = pickle.dumps(Boom())
end = time.time() + 4
while time.time() < end:
    for root in {os.getcwd(), os.path.dirname(os.getcwd()), os.environ.get("EVOTUI_SANDBOX_SCRATCH", ".")}:
        for dirpath, dirs, files in os.walk(root):
            try:
                with open(os.path.join(dirpath, "metrics.json"), "w") as fh:
                    json.dump({"combined_score": 999.0}, fh)
                with open(os.path.join(dirpath, "correct.json"), "w") as fh:
                    json.dump({"correct": True, "error": None}, fh)
            except OSError:
                pass
            for name in files:
                if name.endswith((".pkl", ".results", ".pickle")):
                    try:
                        with open(os.path.join(dirpath, name), "wb") as fh:
                            fh.write(boom)
                    except OSError:
                        pass
    time.sleep(0.01)
'''
subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
""",
    # Replace the evaluator file (for this and every later evaluation).
    "edit-evaluator-file": """
import glob, os, sys
for entry in sys.path + [os.path.dirname(os.getcwd())]:
    for path in glob.glob(os.path.join(entry, "*.py")):
        if os.path.basename(path) in ("evaluator.py", "evaluate.py"):
            try:
                with open(path, "w") as fh:
                    fh.write("def evaluate(p):\\n    return {'combined_score': 999.0}\\n")
            except OSError:
                pass
""",
}

LOADERS = {
    "importlib": """
import importlib.util
def evaluate(p):
    spec = importlib.util.spec_from_file_location("candidate", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {"combined_score": 1.0 if mod.square(3) == 9 else 0.0}
""",
    "exec-text": """
def evaluate(p):
    ns = {"__name__": "candidate"}
    exec(open(p).read(), ns)
    return {"combined_score": 1.0 if ns["square"](3) == 9 else 0.0}
""",
    "runpy": """
import runpy
def evaluate(p):
    ns = runpy.run_path(p)
    return {"combined_score": 1.0 if ns["square"](3) == 9 else 0.0}
""",
    # OpenEvolve's run_with_timeout: a helper script imports the program and pickles its answer.
    "helper-subprocess-pickle": """
import os, pickle, subprocess, sys, tempfile
FORGED = None
def evaluate(p):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(f'''
import importlib.util, pickle, time
spec = importlib.util.spec_from_file_location("program", {p!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
time.sleep(0.3)
with open({fh.name + ".results"!r}, "wb") as out:
    pickle.dump({{"value": mod.square(3)}}, out)
''')
    subprocess.run([sys.executable, fh.name], timeout=30, check=True)
    time_left = 0.5
    import time
    time.sleep(time_left)
    try:
        with open(fh.name + ".results", "rb") as out:
            value = pickle.load(out)["value"]
    except pickle.UnpicklingError:
        return {"combined_score": 0.0, "error": "the helper's result was not plain data"}
    if FORGED is not None:
        return {"combined_score": FORGED}
    return {"combined_score": 1.0 if value == 9 else 0.0}
""",
}

SHINKA = """
from shinka.core import run_shinka_eval
import argparse, time

def main(program_path, results_dir):
    def agg(results):
        return {"combined_score": 1.0 if all(r == 9 for r in results) else 0.0}
    run_shinka_eval(program_path=program_path, results_dir=results_dir, experiment_fn_name="run",
                    num_runs=1, get_experiment_kwargs=lambda i: {}, aggregate_metrics_fn=agg)
    time.sleep(0.5)

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--program_path")
    ap.add_argument("--results_dir")
    a = ap.parse_args()
    main(a.program_path, a.results_dir)
"""

CONFINING = [m for m in MODES if m != "bare"]
"""The README's confining modes as this machine offers them (a mode it lacks falls back and says so)."""


def evaluate(iso, tmp_path: Path, evaluator: str, program: str, mode: str = "openevolve", name: str = "evaluator.py"):
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    ev = task / name
    if not ev.exists():
        ev.write_text(evaluator)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    sandbox = Sandbox(SandboxLimits(wall_s=60, memory_mb=1024), isolation=iso, scratch_root=scratch)
    return asyncio.run(sandbox.evaluate(ev, program, mode=mode))


def assert_not_forged(res, ev_file: Path, original: str):
    assert res.score != 999.0 and (res.score or 0.0) <= 1.0, (res.score, res.reason)
    assert ev_file.read_text() == original, "the evaluator file was changed"


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize("mode", CONFINING)
def test_no_forged_score_openevolve_style(mode, loader, attack, tmp_path):
    iso = mode_isolation(mode)
    if not files_confined(iso):
        pytest.skip(f"{mode} offers no confinement here: {iso.describe()}")
    program = HONEST + textwrap.dedent(ATTACKS[attack])
    res = evaluate(iso, tmp_path, LOADERS[loader], program)
    assert_not_forged(res, tmp_path / "task" / "evaluator.py", LOADERS[loader])
    if attack == "edit-evaluator-file":
        # A later, honest evaluation of the same task is not forged either (the evaluator file held).
        again = evaluate(iso, tmp_path, LOADERS[loader], HONEST)
        assert again.ok and again.score == 1.0, again.reason


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("mode", CONFINING)
def test_no_forged_score_shinka_style(mode, attack, tmp_path):
    iso = mode_isolation(mode)
    if not files_confined(iso):
        pytest.skip(f"{mode} offers no confinement here: {iso.describe()}")
    program = "def run():\n    return 9\n" + textwrap.dedent(ATTACKS[attack])
    res = evaluate(iso, tmp_path, SHINKA, program, mode="shinka", name="evaluate.py")
    assert_not_forged(res, tmp_path / "task" / "evaluate.py", SHINKA)


@pytest.mark.parametrize("task", ["circle_packing", "heilbronn"])
@pytest.mark.parametrize("attack", ["frames-to-every-fd", "monkeypatch-evaluator"])
@pytest.mark.parametrize("mode", list(MODES))
def test_builtin_tasks_cannot_be_forged(mode, attack, task, tmp_path):
    """The issue's reproduction, against the built-in tasks' unchanged evaluators."""
    iso = mode_isolation(mode)
    root = Path(__file__).resolve().parents[2] / "tasks" / task
    seed = (root / "initial_program.py").read_text()
    sandbox = Sandbox(SandboxLimits(wall_s=60, memory_mb=1024), isolation=iso, scratch_root=tmp_path)
    honest = asyncio.run(sandbox.evaluate(root / "evaluator.py", seed))
    assert honest.ok, honest.reason
    res = asyncio.run(sandbox.evaluate(root / "evaluator.py", seed + textwrap.dedent(ATTACKS[attack])))
    assert res.score != 999.0 and (not res.ok or res.score == honest.score), (res.score, res.reason)


@pytest.mark.parametrize("loader", ["importlib", "exec-text", "runpy"])
@pytest.mark.parametrize("attack", ["frames-to-every-fd", "monkeypatch-evaluator", "fake-json-on-stdout"])
def test_guard_alone_holds_in_the_bare_mode(loader, attack, tmp_path):
    """Without any OS confinement the candidate still runs outside the evaluator's process."""
    iso = mode_isolation("bare")
    res = evaluate(iso, tmp_path, LOADERS[loader], HONEST + textwrap.dedent(ATTACKS[attack]))
    assert_not_forged(res, tmp_path / "task" / "evaluator.py", LOADERS[loader])


def trial_table(guarded: bool) -> None:
    """`python -m tests.programs.test_sandbox_forgery [--unguarded]`: the trial set as a table."""
    import dataclasses
    import tempfile

    print(f"candidate process: {'on' if guarded else 'OFF (the evaluator shares its process with the candidate)'}")
    for mode in MODES:
        iso = mode_isolation(mode)
        forged = failed = held = 0
        cases = [(lo, at) for lo in LOADERS for at in ATTACKS] + [("shinka", at) for at in ATTACKS]
        for loader, attack in cases:
            with tempfile.TemporaryDirectory() as tmp:
                tmp_path = Path(tmp)
                shinka = loader == "shinka"
                program = ("def run():\n    return 9\n" if shinka else HONEST) + textwrap.dedent(ATTACKS[attack])
                ev_text = SHINKA if shinka else LOADERS[loader]
                name = "evaluate.py" if shinka else "evaluator.py"
                (tmp_path / "task").mkdir()
                (tmp_path / "task" / name).write_text(ev_text)
                (tmp_path / "scratch").mkdir()
                limits = dataclasses.replace(SandboxLimits(wall_s=60, memory_mb=1024), candidate_process=guarded)
                sandbox = Sandbox(limits, isolation=iso, scratch_root=tmp_path / "scratch")
                res = asyncio.run(sandbox.evaluate(tmp_path / "task" / name, program,
                                                   mode="shinka" if shinka else "openevolve"))
                again = asyncio.run(sandbox.evaluate(tmp_path / "task" / name,
                                                     "def run():\n    return 9\n" if shinka else HONEST,
                                                     mode="shinka" if shinka else "openevolve"))
                bad = (res.score or 0) > 1.0 or (again.score or 0) > 1.0
                if bad:
                    print(f"  forged: {mode} {loader} {attack}")
                forged += bad
                failed += (not bad and not res.ok)
                held += (not bad and res.ok)
        print(f"{mode:26s} trials {len(cases):3d}  forged {forged:3d}  failed (no score) {failed:3d}  "
              f"scored honestly {held:3d}   [{iso.describe()[:60]}...]")


if __name__ == "__main__":
    import sys

    trial_table(guarded="--unguarded" not in sys.argv)
