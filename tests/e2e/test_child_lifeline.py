"""The bench's helper processes end with it (evotui/peers/lifeline.py): a sim server started with
`--parent-pid` exits once that parent is killed, even by SIGKILL, which no `with` block survives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from evotui.peers.lifeline import ORPHANED_EXIT
from tests.e2e.conftest import ROOT, free_port, wait_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")

# The bench's part: start a sim server that watches this process, print its pid, then wait. Its
# stderr goes to a file, or to a pipe to this process as SimEndpoint's does (dead with it).
_PARENT = """
import os, subprocess, sys
err = subprocess.PIPE if sys.argv[2] == "pipe" else open(sys.argv[2], "w")
server = subprocess.Popen([sys.executable, "-m", "evotui.cli", "sim-server", "--port", sys.argv[1],
                           "--time-scale", "2000", "--parent-pid", str(os.getpid())], stderr=err)
print(server.pid, flush=True)
server.wait()
"""


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet (its parent was killed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.parametrize("stderr_to", ["file", "pipe"])
def test_a_sim_server_exits_when_its_parent_is_killed(tmp_path, stderr_to):
    port, err = free_port(), tmp_path / "server.err"
    err.write_text("")
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(port), str(err) if stderr_to == "file" else "pipe"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    server_pid = int(parent.stdout.readline())
    try:
        wait_until(lambda: _healthy(f"http://127.0.0.1:{port}/health") or _gone(server_pid), "the server to start")
        assert not _gone(server_pid), err.read_text()  # it serves while its parent lives
        parent.kill()
        parent.wait(timeout=30)
        wait_until(lambda: _gone(server_pid), "the orphaned server to exit")
    finally:
        if not _gone(server_pid):
            os.kill(server_pid, 9)
        parent.stdout.close()
    if stderr_to == "file":
        assert f"its parent process {parent.pid} is gone; exiting" in err.read_text()
    assert not _healthy(f"http://127.0.0.1:{port}/health")


def test_a_watcher_whose_parent_is_already_another_exits_with_its_own_status():
    gone = os.getpid() + 1  # not the probe's parent (this process is)
    code = ("import time; from evotui.peers.lifeline import exit_with_parent; "
            f"exit_with_parent({gone}, 'probe', poll_s=0.01); time.sleep(60)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == ORPHANED_EXIT
    assert proc.stderr.strip() == f"probe: its parent process {gone} is gone; exiting"
