"""A second SIGTERM (or Ctrl+C) during a drain kills evaluations that take minutes within the
sandbox's grace (issue 35, item 6): the run ends interrupted (exit 130, resumable), and its
socket file and the evaluations' scratch directories are gone. Before, a slow seed
evaluation was awaited whatever the signals said (the run outlived any service manager's grace).
The first signal alone drains and would wait for the evaluation."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, wait_until

SEED = "# EVOLVE-BLOCK-START\nX = 1.0\n# EVOLVE-BLOCK-END\n"
# Sleeps for minutes on every program (slow_seed) or on every program but the seed.
EVALUATOR = """
import time
def evaluate(program_path):
    text = open(program_path).read()
    if SLOW_SEED or 'X = 1.0' not in text:
        time.sleep(600)
    return {'combined_score': 0.5}
"""
STOPPED_WITHIN_S = 40.0
"""The sandbox's own grace is 6 s for the supervisor plus its 5 s clean-up; the evaluation sleeps 600 s."""


def _folder(tmp_path: Path, slow_seed: bool) -> Path:
    folder = tmp_path / "slow"
    folder.mkdir()
    (folder / "initial_program.py").write_text(SEED)
    (folder / "evaluator.py").write_text(f"SLOW_SEED = {slow_seed}\n" + EVALUATOR)
    (folder / "config.yaml").write_text("evaluator:\n  timeout: 900\n  cascade_evaluation: false\n")
    return folder


def _scratches(root: Path) -> list[Path]:
    return [p for p in root.glob("evotui-eval-*") if (p / "program.py").is_file()]


@pytest.mark.parametrize("slow_seed", [True, False], ids=["seed-evaluation", "child-evaluation"])
def test_a_second_sigterm_kills_slow_evaluations(tmp_path: Path, slow_seed: bool) -> None:
    folder = _folder(tmp_path, slow_seed)
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "run", str(folder), "--llm", "sim", "--no-ui", "--quiet",
         "--max-proposals", "4", "--time-scale", "2000", "--db", str(db)],
        cwd=ROOT, env={**os.environ, "TMPDIR": str(scratch_root)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        def slow_one_running() -> bool:
            assert proc.poll() is None, proc.communicate()
            return any(slow_seed or "X = 1.0" not in (s / "program.py").read_text() for s in _scratches(scratch_root))
        wait_until(slow_one_running, "a slow evaluation to start")
        # The control socket is up before any evaluation starts (none where the path is too long).
        sockets = list(tmp_path.glob("r.db.*.sock"))
        lines: list[str] = []

        def read_stderr() -> None:
            for line in iter(proc.stderr.readline, ""):
                lines.append(line)
        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: any("draining" in ln for ln in lines), "the first SIGTERM's drain")
        assert proc.poll() is None, "the first SIGTERM must drain, not stop"
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        proc.wait(timeout=STOPPED_WITHIN_S + 60)
        took = time.monotonic() - t0
        reader.join(timeout=30)
        err = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < STOPPED_WITHIN_S, (took, err[-2000:])
    assert proc.returncode == 130, err[-2000:]
    assert "stopping now" in err
    assert all(not s.exists() for s in sockets), "the control socket file was left behind"
    assert _scratches(scratch_root) == [], "an evaluation's scratch directory was left behind"
