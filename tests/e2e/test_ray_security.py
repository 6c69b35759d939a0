"""Issue 31 (Ray): the run's own Ray instance (no address) listens on loopback only and refuses a
client without its token, the token never lands in a file, and a Ray worker killed mid-run leaves
`--no-ui` stdout pure JSON (Ray's "A worker died" goes to stderr). One Ray start, by the run itself.

Sockets are read from /proc (/proc/net/tcp{,6} and each process's fds): every listening TCP socket
of every process under the run, and of any process naming the run's Ray directory.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, ROOT, evotui, wait_until
from tests.e2e.test_ray_evaluator import _cmdline, _parent, config_file, evaluating_worker, slow_task

RAY_CLIENT_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")


def _listening() -> dict[str, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket on this machine."""
    out = {}
    for table, width in (("tcp", 4), ("tcp6", 16)):
        try:
            rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            hex_ip, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_ip)
            # The kernel prints each 32-bit word in host (little-endian) order.
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, width, 4))
            out[fields[9]] = (str(ipaddress.ip_address(raw)), int(hex_port, 16))
    return out


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def _run_processes(root_pid: int, marker: str) -> set[int]:
    """The run's process and all its descendants, plus any process whose command line names marker
    (a Ray process that left the tree would still be counted)."""
    children: dict[int, list[int]] = {}
    marked = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            pid = int(entry.name)
            children.setdefault(_parent(pid), []).append(pid)
            if marker in _cmdline(pid):
                marked.add(pid)
    seen, todo = set(), [root_pid]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, []))
    return seen | marked


def _program(pid: int) -> str:
    """The process's program name (gcs_server, raylet, python, ray::IDLE, ...)."""
    words = _cmdline(pid).split()
    return Path(words[0]).name if words else ""


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


PROBE = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"evotui-probe", None, timeout=20)
    print("answered")
except Exception as exc:
    print("refused", type(exc).__name__)
"""


def _probe_gcs(address: str, token: str | None) -> str:
    """One request to the GCS from a fresh process, with the given token or none."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_CLIENT_ENV}
    if token is not None:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    done = subprocess.run([sys.executable, "-c", PROBE, address], env=env, capture_output=True, text=True,
                          timeout=120)
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"no answer: {done.stderr[-500:]}"


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_own_ray_instance_is_loopback_only_token_protected_and_stdout_stays_json(tmp_path_factory, tmp_path):
    ray_dir = tmp_path_factory.mktemp("rs")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in RAY_CLIENT_ENV}
    env.update(HOME=str(home), RAY_TMPDIR=str(ray_dir), RAY_USAGE_STATS_ENABLED="0")
    args = [sys.executable, "-m", "evotui.cli", "run", str(slow_task(tmp_path, 2.0)), "--no-ui", "--db",
            str(tmp_path / "r.db"), "--evaluator", "ray", "--config", str(config_file(tmp_path, local_num_cpus=1)),
            "--max-metric-calls", "4", *FAST]
    run = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scratch = tmp_path / "scratch"
    try:
        wait_until(lambda: run.poll() is not None or evaluating_worker(scratch) is not None,
                   "an evaluation running on the run's Ray instance")
        assert run.poll() is None, run.communicate()
        # Every Ray process is up now (a worker is evaluating): every socket they listen on.
        listening = _listening()
        procs = _run_processes(run.pid, str(ray_dir))
        sockets = {(pid, _program(pid)): listening[ino] for pid in procs for ino in _socket_inodes(pid)
                   if ino in listening}
        gcs = [pid for pid in procs if _program(pid) == "gcs_server"]
        assert len(gcs) == 1, sorted(_cmdline(p)[:80] for p in procs)
        kinds = {name for (_, name) in sockets}
        assert {"gcs_server", "raylet"} <= kinds, sockets  # the check saw Ray's servers, not nothing
        assert all(_is_loopback(addr) for addr, _ in sockets.values()), sockets

        gcs_env = _environ(gcs[0])
        assert gcs_env.get("RAY_AUTH_MODE") == "token" and len(gcs_env.get("RAY_AUTH_TOKEN", "")) == 64
        gcs_port = next(port for (pid, _), (_, port) in sockets.items() if pid == gcs[0])
        address = f"127.0.0.1:{gcs_port}"
        assert _probe_gcs(address, None).startswith("refused AuthenticationError")
        assert _probe_gcs(address, gcs_env["RAY_AUTH_TOKEN"]) == "answered"  # the probe itself works

        victim: list[int] = []  # filled by the wait below

        def evaluating() -> bool:
            victim[:] = [pid for pid in [evaluating_worker(scratch)] if pid is not None]
            return bool(victim) or run.poll() is not None

        wait_until(evaluating, "an evaluation to kill")
        assert victim, run.communicate()
        os.kill(victim[0], signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err[-3000:]
    summary = json.loads(out)  # all of stdout: nothing of Ray's before or after the summary
    assert summary["status"] == "completed" and summary["metric_calls"] == 4
    assert summary["evaluator"]["address"] == "local" and summary["evaluator"]["retried"] >= 1
    assert "A worker died" in err  # Ray's notice is kept, on stderr
    assert "Traceback" not in err
    assert not (home / ".ray").exists(), "the run's token was written under HOME"


def test_an_unreadable_cluster_token_file_is_one_line_and_exit_2(tmp_path):
    """Checked before Ray is asked to connect (whose own check would abort the process)."""
    with socket.socket() as listener:  # a port that accepts connections: the address is reachable
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        cfg = config_file(tmp_path, auth_token_file=str(tmp_path / "no-token"))
        proc = evotui("run", "circle_packing", "--no-ui", "--db", str(tmp_path / "r.db"), "--ray-address", address,
                      "--config", str(cfg), "--max-proposals", "2", *FAST, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"cannot read [evaluator] auth_token_file {tmp_path / 'no-token'} (No such file or directory)" in proc.stderr


def test_a_token_file_without_a_cluster_address_is_refused(tmp_path):
    (tmp_path / "tok").write_text("abc\n")
    cfg = config_file(tmp_path, backend="ray", auth_token_file=str(tmp_path / "tok"))
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(tmp_path / "r.db"), "--config", str(cfg),
                  "--max-proposals", "2", *FAST, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "auth_token_file is the token of a cluster: set address too" in proc.stderr
