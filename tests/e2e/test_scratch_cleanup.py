"""A bench ended by SIGTERM, and a helper process ended by its lifeline, leave no scratch
directory behind (evotui/scratch.py). Each process gets its own TMPDIR under tmp_path, so
only its own directories are looked at."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evotui.peers.lifeline import ORPHANED_EXIT
from tests.e2e.conftest import ROOT, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _scratch_dbs(tmp: Path) -> list[Path]:
    return list(tmp.glob("evotui-bench-*/*.db"))


def test_a_bench_ended_by_sigterm_removes_its_scratch_directory_and_dies_of_the_signal(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # A budget far larger than the time the test waits: the bench is mid-run when the signal comes.
    bench = subprocess.Popen([sys.executable, "-m", "evotui.cli", "bench", "rules", "--modes", "chain-8",
                              "--seeds", "1", "--proposals", "5000", "--time-scale", "40", "--json"],
                             cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _scratch_dbs(tmp) or bench.poll() is not None, "the bench's run database")
        assert bench.poll() is None, bench.communicate()[1]
        bench.send_signal(signal.SIGTERM)
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
    assert bench.returncode == -signal.SIGTERM, err  # the status SIGTERM's default action gives
    assert "Traceback" not in err
    assert list(tmp.iterdir()) == []


def test_a_helper_ended_by_its_lifeline_removes_its_scratch_directories(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    gone = os.getpid() + 1  # not the probe's parent (this process is), so the lifeline ends it
    code = ("import time\n"
            "from evotui import scratch\n"
            "from evotui.peers.lifeline import exit_with_parent\n"
            "with scratch.directory('evotui-peer-') as d, open(d + '/run.db', 'w'):\n"
            "    print(d, flush=True)\n"
            f"    exit_with_parent({gone}, 'probe', poll_s=0.2)\n"
            "    time.sleep(60)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == ORPHANED_EXIT, proc.stderr
    made = Path(proc.stdout.strip())
    assert made.parent == tmp and made.name.startswith("evotui-peer-")
    assert not made.exists()
    assert list(tmp.iterdir()) == []


def test_sigterm_without_scratch_directories_still_ends_the_process(tmp_path):
    # The handler changes what SIGTERM leaves behind, not that it ends the process.
    code = ("import os, signal, time\n"
            "from evotui import scratch\n"
            "scratch.remove_on_sigterm()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(60)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
