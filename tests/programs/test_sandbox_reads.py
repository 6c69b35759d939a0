"""Reads confined, secrets scrubbed by value, oversized results named (issue 31, items 2 and 7).

Evaluated code (the evaluator and the candidate it imports) tries to read the run's database, a
key file in a home directory and a secret held under an innocuous variable name. Read
confinement needs Landlock; a mode without it is skipped with its note as the reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.isolation import scrubbed_env
from tests.programs.test_sandbox_hostile import MODES, mode_isolation

ATTEMPT = """
import os
def attempt(path):
    try:
        with open(path, "rb") as fh:
            fh.read(16)
        return "read"
    except OSError as exc:
        return type(exc).__name__
"""
PROBE = ATTEMPT + """
def look(paths):
    return {os.path.basename(p): attempt(p) for p in paths}
"""
# The evaluator tries the same reads itself, then asks the candidate it imported to.
EVALUATOR = ATTEMPT.replace("{", "{{").replace("}", "}}") + """
import importlib.util, json
PATHS = {paths!r}
def evaluate(p):
    spec = importlib.util.spec_from_file_location("candidate", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = {{"evaluator:" + os.path.basename(q): attempt(q) for q in PATHS}}
    seen.update({{"candidate:" + k: v for k, v in mod.look(PATHS).items()}})
    return {{"combined_score": 1.0, "seen": json.dumps(seen)}}
"""


def _victims(tmp_path: Path) -> list[str]:
    db = tmp_path / "runs" / "evotui.db"
    db.parent.mkdir()
    with sqlite3.connect(db) as con:
        con.execute("create table t (x)")
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    return [str(db), str(key)]


@pytest.mark.parametrize("mode", list(MODES))
def test_database_and_home_keys_are_unreadable(mode, tmp_path):
    iso = mode_isolation(mode)
    if not iso.landlock:
        pytest.skip(f"no Landlock in this mode, so reads are not confined: {iso.describe()}")
    victims = _victims(tmp_path)
    task = tmp_path / "task"
    task.mkdir()
    (task / "evaluator.py").write_text(EVALUATOR.format(paths=victims))
    (task / "data.txt").write_text("the task's own data")
    sandbox = Sandbox(SandboxLimits(wall_s=60), isolation=iso, scratch_root=tmp_path / "scratch")
    (tmp_path / "scratch").mkdir()
    res = asyncio.run(sandbox.evaluate(task / "evaluator.py", PROBE + "\nOWN = open(__file__).read()\n"))
    assert res.ok, res.reason
    seen = json.loads(res.feedback["seen"])
    assert len(seen) == 4 and all(v == "PermissionError" for v in seen.values()), seen
    # The task folder and a declared path stay readable.
    readable = asyncio.run(Sandbox(SandboxLimits(wall_s=60, read_paths=(str(tmp_path / "home"),)), isolation=iso,
                                   scratch_root=tmp_path / "scratch").evaluate(task / "evaluator.py", PROBE))
    seen = json.loads(readable.feedback["seen"])
    assert seen["evaluator:id_ed25519"] == "read" and seen["candidate:id_ed25519"] == "read", seen
    assert seen["evaluator:evotui.db"] == "PermissionError", seen


def test_secrets_are_scrubbed_by_value_and_shape():
    key = "sk-proj-" + "a1B2" * 10
    env = scrubbed_env({"OPENAI_API_KEY": key, "MY_SETTING": key, "ENDPOINT": f"https://u:{key}@host/v1",
                        "UNRELATED_VALUE": "sk-ant-api03-" + "x" * 30, "HF": "hf_" + "Q" * 30,
                        "CUSTOM_KEY_VAR": "opaque-value-42", "LANG": "C.UTF-8", "FLAG": "1"},
                       home="/scratch", secret_vars=frozenset({"CUSTOM_KEY_VAR"}))
    assert {"OPENAI_API_KEY", "MY_SETTING", "ENDPOINT", "UNRELATED_VALUE", "HF", "CUSTOM_KEY_VAR"}.isdisjoint(env)
    assert env["LANG"] == "C.UTF-8" and env["FLAG"] == "1"


ENGINE = """
import asyncio, dataclasses, json, sys
from engine.sandbox import Sandbox, SandboxLimits
res = asyncio.run(Sandbox(SandboxLimits(wall_s=60), scratch_root=sys.argv[2]).evaluate(sys.argv[1], "x = 1\\n"))
print(json.dumps(dataclasses.asdict(res)))
"""


def test_a_secret_under_an_innocuous_name_does_not_reach_evaluated_code(tmp_path):
    """The engine holds OPENAI_API_KEY and the same key in MY_SETTING from its start, as a user's
    shell would give it; the evaluator looks for the key in its environment and its process's."""
    key = "sk-test-" + "Z9" * 16
    ev = tmp_path / "evaluator.py"
    ev.write_text(f"""
import os
def evaluate(p):
    hits = [k for k, v in os.environ.items() if {key!r} in v]
    return {{"combined_score": 1.0, "hits": ",".join(hits) or "none"}}
""")
    (tmp_path / "scratch").mkdir()
    proc = subprocess.run([sys.executable, "-c", ENGINE, str(ev), str(tmp_path / "scratch")],
                          env={**os.environ, "OPENAI_API_KEY": key, "MY_SETTING": key}, capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["ok"] and res["feedback"]["hits"] == "none", res


def test_an_oversized_result_is_named_not_lost(tmp_path):
    ev = tmp_path / "evaluator.py"
    ev.write_text("def evaluate(p):\n    return {'combined_score': 1.0, **{f'm{i}': float(i) for i in range(300000)}}\n")
    res = asyncio.run(Sandbox(SandboxLimits(wall_s=60), scratch_root=tmp_path).evaluate(ev, "x = 1\n"))
    assert not res.ok
    assert "300001 metrics" in res.reason and "over the 4 MiB limit" in res.reason, res.reason


def test_limits_carry_the_task_settings():
    from engine.tasks.program_task import ProgramSettings

    limits = ProgramSettings(eval_read_paths=["~/.rustup"], eval_candidate_process=False).limits()
    assert limits.read_paths == ("~/.rustup",) and limits.candidate_process is False
    assert dataclasses.replace(limits).read_paths == ("~/.rustup",)


def test_python_subprocesses_of_the_evaluator_get_no_sockets_either(tmp_path):
    """The mode without a network namespace refuses Python sockets by an audit hook; a Python
    subprocess that the evaluator starts has it too (guard_site/sitecustomize.py)."""
    import socket

    iso = mode_isolation("bare")
    assert not iso.network
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    ev = tmp_path / "evaluator.py"
    ev.write_text(f"""
import subprocess, sys
CHILD = "import socket; s = socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', {port})); print('connected')"
def evaluate(p):
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30)
    return {{"combined_score": 1.0, "child": (out.stdout + out.stderr)[-300:]}}
""")
    try:
        res = asyncio.run(Sandbox(SandboxLimits(wall_s=60), isolation=iso, scratch_root=tmp_path).evaluate(ev, "x = 1\n"))
    finally:
        server.close()
    assert res.ok, res.reason
    assert "connected" not in res.feedback["child"] and "network access is disabled" in res.feedback["child"]
