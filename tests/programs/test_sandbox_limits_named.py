"""Resource limits and tool homes (issue 35, items 2 and 3): an evaluation stopped by a limit
says which limit and which key raises it; the user's toolchains are found although HOME is the
evaluation's scratch, read-only, with the tools' own writes in scratch."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sandbox import EvalResult, Sandbox, SandboxLimits
from engine.sandbox.isolation import detect
from engine.sandbox.limit_hints import limit_hint
from engine.sandbox.toolchains import toolchain_env

LIMITS = SandboxLimits(wall_s=5, memory_mb=256, nproc=8)


def _evaluate(tmp_path: Path, evaluator: str, limits: SandboxLimits = LIMITS) -> EvalResult:
    ev = tmp_path / "evaluator.py"
    ev.write_text(evaluator)
    return asyncio.run(Sandbox(limits, scratch_root=tmp_path).evaluate(ev, "x = 1\n"))


def test_out_of_address_space_names_eval_memory_mb(tmp_path):
    res = _evaluate(tmp_path, "def evaluate(p):\n    b = bytearray(1024 * 1024 * 1024)\n    return {'combined_score': 1.0}\n")
    assert not res.ok and "[program] eval_memory_mb = 256" in res.reason, res.reason


def test_a_timeout_names_eval_timeout_s(tmp_path):
    res = _evaluate(tmp_path, "import time\ndef evaluate(p):\n    time.sleep(60)\n", SandboxLimits(wall_s=1))
    assert res.timed_out and "raise [program] eval_timeout_s (now 1" in res.reason, res.reason


@pytest.mark.parametrize(("reason", "stderr", "code", "expected"), [
    ("crashed", "LLVM ERROR: Unable to allocate section memory!", -signal.SIGABRT, "eval_memory_mb = 256"),
    ("RuntimeError: can't start new thread", "", 1, "eval_nproc = 8"),
    ("killed by SIGKILL", "", -signal.SIGKILL, "eval_memory_mb"),
    ("file size limit exceeded (64 MB)", "", -signal.SIGXFSZ, "eval_fsize_mb"),
    ("CPU time limit exceeded (6 s)", "", -signal.SIGXCPU, "eval_timeout_s"),
    ("ValueError: room for improvement", "", 1, ""),
])
def test_each_limit_is_named(reason, stderr, code, expected):
    hint = limit_hint(EvalResult(ok=False, reason=reason, stderr_tail=stderr, exit_code=code), LIMITS)
    assert (expected in hint) if expected else hint == "", hint


def test_toolchain_homes_follow_the_real_home_and_writes_go_to_scratch(tmp_path):
    home = tmp_path / "home"
    for d in (".rustup", ".cargo/bin", ".julia"):
        (home / d).mkdir(parents=True)
    env, readable = toolchain_env({"HOME": str(home), "PATH": f"{home}/.cargo/bin:/usr/bin"}, "/scratch")
    assert env["RUSTUP_HOME"] == str(home / ".rustup")
    assert env["CARGO_HOME"] == "/scratch/.cargo-home"
    assert env["JULIA_DEPOT_PATH"] == f"/scratch/.julia-depot:{home / '.julia'}"
    assert "GOPATH" not in env  # nothing at ~/go: not invented
    assert {str(home / ".rustup"), str(home / ".cargo"), str(home / ".cargo" / "bin")} <= set(readable)


ENGINE = """
import asyncio, dataclasses, json, sys
from engine.sandbox import Sandbox, SandboxLimits
res = asyncio.run(Sandbox(SandboxLimits(wall_s=60), scratch_root=sys.argv[2]).evaluate(sys.argv[1], "x = 1\\n"))
print(json.dumps(dataclasses.asdict(res)))
"""


def test_an_evaluation_runs_a_tool_from_the_home_read_only(tmp_path):
    """A fake toolchain under a home directory the engine sees: the evaluation finds it through
    RUSTUP_HOME, runs its binary from PATH, and cannot write into it."""
    home = tmp_path / "home"
    tool = home / ".rustup" / "toolchains" / "stable" / "bin"
    tool.mkdir(parents=True)
    (tool / "rustc").write_text("#!/bin/sh\necho rustc-fake-1.0\n")
    (tool / "rustc").chmod(0o755)
    (home / ".cargo" / "bin").mkdir(parents=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("secret")
    ev = tmp_path / "task" / "evaluator.py"
    ev.parent.mkdir()
    ev.write_text("""
import os, subprocess
def evaluate(p):
    home = os.environ["RUSTUP_HOME"]
    out = subprocess.run([os.path.join(home, "toolchains/stable/bin/rustc")], capture_output=True, text=True).stdout
    try:
        open(os.path.join(home, "planted"), "w").write("x")
        wrote = "yes"
    except OSError:
        wrote = "no"
    try:
        open(os.path.join(os.path.dirname(home), ".ssh", "id_ed25519")).read()
        key = "read"
    except OSError:
        key = "refused"
    return {"combined_score": 1.0, "out": out.strip(), "wrote": wrote, "key": key}
""")
    (tmp_path / "scratch").mkdir()
    proc = subprocess.run([sys.executable, "-c", ENGINE, str(ev), str(tmp_path / "scratch")], capture_output=True,
                          text=True, timeout=300, cwd=str(tmp_path), env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["ok"], res["reason"]
    assert res["feedback"]["out"] == "rustc-fake-1.0"
    if detect().landlock or detect().mounts:
        assert res["feedback"]["wrote"] == "no"
    if detect().landlock:
        assert res["feedback"]["key"] == "refused"
