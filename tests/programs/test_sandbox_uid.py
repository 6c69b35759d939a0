"""uid mode (root without namespaces): each evaluation runs as an unprivileged uid of its own.

It needs the interpreter, the task folder and the scratch root readable by a uid that owns
nothing; pytest's tmp_path lies under a 0700 directory, so this test alone works in a directory
of its own made with mkdtemp in the system temp dir (unique name, removed at the end; nothing
else there is looked at)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from engine.sandbox import Isolation, Sandbox, SandboxLimits, isolation, uids


def _python() -> str | None:
    for cand in (sys.executable, "/usr/bin/python3"):
        if cand and uids.reachable(cand, execute=True):
            return cand
    return None


@pytest.fixture
def world_dir():
    path = tempfile.mkdtemp(prefix="evotui-uid-test-")
    os.chmod(path, 0o755)
    if not uids.dir_reachable(path):
        shutil.rmtree(path)
        pytest.skip(f"the system temp dir {tempfile.gettempdir()} is not world-searchable")
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


def test_uid_mode_confines_files_processes_and_uid(world_dir):
    if os.geteuid() != 0:
        pytest.skip("uid switching needs root")
    python = _python()
    if python is None:
        pytest.skip("no interpreter readable by an unprivileged uid")
    iso = Isolation((), False, False, uid_switch=True, landlock=0)
    why = isolation.probe(iso, python)
    if why:
        pytest.skip(f"uid mode unavailable: {why}")
    marker = f"evotui-uid-daemon-{secrets.token_hex(6)}"
    victim = world_dir / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o644)
    task = world_dir / "task"
    task.mkdir(mode=0o755)
    ev = task / "evaluator.py"
    ev.write_text(f"""
import os, sys, time
def evaluate(p):
    out = {{"uid": float(os.getuid())}}
    try:
        open({str(victim)!r}, "a").write("evil")
        out["victim"] = "written"
    except OSError as exc:
        out["victim"] = type(exc).__name__
    try:
        open(f"/proc/{{os.getppid()}}/environ", "rb").read()
        out["environ"] = "read"
    except OSError as exc:
        out["environ"] = type(exc).__name__
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", {marker!r}])
    time.sleep(0.5)
    out["combined_score"] = 1.0
    return out
""")
    ev.chmod(0o644)
    scratch = world_dir / "scratch"
    scratch.mkdir(mode=0o755)
    sandbox = Sandbox(SandboxLimits(wall_s=60), isolation=iso, python=python, scratch_root=scratch)
    try:
        res = asyncio.run(sandbox.evaluate(ev, "x = 1\n"))
        assert res.ok, (res.reason, res.stderr_tail)
        assert res.metrics["uid"] >= uids.UID_BASE and not res.warnings[1:], res.warnings
        assert res.feedback["victim"] != "written" and victim.read_text() == "original"
        assert res.feedback["environ"] != "read"
        assert not _marked(marker)
        assert not list(scratch.iterdir())
    finally:
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def _marked(marker: str) -> list[int]:
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                out.append(int(name))
        except OSError:
            continue
    return out


def test_reachable_follows_every_directory(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "f.py").write_text("x")
    (private / "f.py").chmod(0o644)
    assert not uids.reachable(str(private / "f.py"))
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
