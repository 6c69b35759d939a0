"""Evaluations on Ray (issue 20): a program run improves with --evaluator ray, a worker killed
mid-evaluation is retried and the budgets stay exact, a cluster stopped mid-run stops the run
resumable and resume completes it, hostile evaluators are contained as they are locally.

One Ray head per module (127.0.0.1, 2 CPUs, no dashboard, its files under the test's temporary
directory), started with `ray start --block` in its own session and stopped by killing that
session's process group; the lost-cluster test starts and kills a head of its own.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, ROOT, evotui, free_port, summary_of

if importlib.util.find_spec("ray") is None:
    if os.environ.get("EVOTUI_REQUIRE_RAY") == "1":
        raise RuntimeError("EVOTUI_REQUIRE_RAY=1 but ray is not importable: pip install 'evotui[ray]'")
    pytest.skip("ray is not installed (pip install 'evotui[ray]')", allow_module_level=True)

RAY_ENV = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
"""Ray listens on every interface whatever --node-ip-address says: the test clusters require a
token, a fresh one per module, given through the environment (no file in the home directory),
and report no usage."""


class Head:
    def __init__(self, root: Path, cpus: int = 2) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.root = root
        self.proc = _ray_start(["--head", f"--port={self.port}", f"--num-cpus={cpus}", "--include-dashboard=false",
                                "--disable-usage-stats", f"--temp-dir={root}"])
        deadline = time.monotonic() + 120
        while not self._listening():
            assert self.proc.poll() is None, "ray start exited"
            assert time.monotonic() < deadline, "the Ray head did not open its port within 120 s"
            time.sleep(0.2)

    def join(self) -> subprocess.Popen:
        """A second node (1 CPU) in its own session; kill its process group to lose it. Returns once
        the cluster counts it: on a loaded machine a node can take seconds to register, and a run
        started before that sees one node and never schedules on the other."""
        node = _ray_start([f"--address={self.address}", "--num-cpus=1"])
        deadline = time.monotonic() + 120
        while self.alive_nodes() < 2:
            assert node.poll() in (None, 0), "ray start (the second node) failed"
            assert time.monotonic() < deadline, "the second Ray node did not register within 120 s"
            time.sleep(0.5)
        return node

    def alive_nodes(self) -> int:
        """The cluster's live nodes, asked by a short-lived driver of its own."""
        probe = "import ray; ray.init(address=%r, logging_level='ERROR'); print(sum(n['Alive'] for n in ray.nodes()))"
        out = subprocess.run([sys.executable, "-c", probe % self.address], capture_output=True, text=True,
                             timeout=120, env={**os.environ, **RAY_ENV})
        lines = out.stdout.strip().splitlines()
        return int(lines[-1]) if out.returncode == 0 and lines and lines[-1].isdigit() else 0

    def _listening(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        """Every process of the head's session (GCS, raylet, workers), at once."""
        _kill_session(self.proc)


def _ray_start(args: list[str]) -> subprocess.Popen:
    ray = str(Path(sys.executable).with_name("ray"))
    return subprocess.Popen([ray, "start", "--block", "--node-ip-address=127.0.0.1", *args],
                            env={**os.environ, **RAY_ENV, "SECRET_API_KEY": "hunter2-ray"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _kill_session(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    proc.wait()


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    h = Head(tmp_path_factory.mktemp("ray"))
    yield h
    h.kill()


def config_file(tmp_path: Path, **evaluator) -> Path:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    lines = ["[evaluator]", f'scratch_root = "{scratch}"'] + [f"{k} = {v!r}".replace("'", '"')
                                                              for k, v in evaluator.items()]
    path = tmp_path / "cluster.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def ray_env() -> dict:
    return dict(RAY_ENV)


def test_program_task_improves_on_ray(head, tmp_path):
    db = tmp_path / "r.db"
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--evaluator", "ray", "--ray-address",
                  head.address, "--config", str(config_file(tmp_path)), "--max-proposals", "24", "--mode", "sync",
                  *FAST, env=ray_env(), timeout=300)  # sync: the improvement does not hang on timing
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary_of(proc)
    assert s["status"] == "completed" and s["best_score"] > s["seed_score"]
    ev = s["evaluator"]
    assert ev["backend"] == "ray" and ev["address"] == head.address and ev["nodes"] == 1
    assert ev["completed"] == s["metric_calls"] and ev["gave_up"] == 0 and ev["lost"] == ""
    assert 1 <= ev["limit"] <= 2  # two CPUs, one per evaluation
    assert not [p for p in (tmp_path / "scratch").iterdir() if p.name.startswith("evotui-eval-")]


def slow_task(tmp_path: Path, seconds: float) -> Path:
    """circle_packing whose evaluator takes `seconds` longer (so a kill lands mid-evaluation)."""
    task = tmp_path / "slow_packing"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    ev = task / "evaluator.py"
    text = ev.read_text()
    ev.write_text(text.replace("def evaluate(program_path):\n",
                               f"def evaluate(program_path):\n    import time\n    time.sleep({seconds})\n", 1))
    return task


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _works_under(pid: int, root: Path) -> bool:
    """The process's working directory (a sandbox runner's is its scratch directory) is under root."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(root)
    except OSError:
        return False


def evaluating_worker(root: Path) -> int | None:
    """The Ray worker (a process titled ray::...) above a running sandbox runner whose scratch
    directory is under root: an evaluation of this test is in progress there."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        line = _cmdline(int(entry.name))
        if "evotui_sandbox_runner" not in line or not _works_under(int(entry.name), root):
            continue
        pid = int(entry.name)
        for _ in range(8):
            pid = _parent(pid)
            if pid <= 1:
                break
            if _cmdline(pid).startswith("ray::"):
                return pid
    return None


def test_a_worker_killed_mid_evaluation_is_retried_and_budgets_stay_exact(head, tmp_path):
    db = tmp_path / "r.db"
    cfg = config_file(tmp_path)
    args = [sys.executable, "-m", "evotui.cli", "run", str(slow_task(tmp_path, 1.5)), "--no-ui", "--db", str(db),
            "--evaluator", "ray", "--ray-address", head.address, "--config", str(cfg), "--max-metric-calls", "5",
            *FAST]
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **RAY_ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        killed = evaluating_worker(tmp_path / "scratch")
        if killed is None:
            time.sleep(0.05)
    assert killed is not None, "never saw an evaluation running on a Ray worker"
    os.kill(killed, signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    s = summary_of(subprocess.CompletedProcess(args, 0, out, err))
    assert s["status"] == "completed" and s["stop_reason"].startswith("budget")
    assert s["metric_calls"] == 5 and s["budget_spent"]["metric_calls"] == 5
    ev = s["evaluator"]
    assert ev["retried"] >= 1 and ev["gave_up"] == 0 and ev["completed"] == 5


def test_a_stopped_cluster_stops_the_run_resumable_and_resume_completes(tmp_path_factory, tmp_path):
    own = Head(tmp_path_factory.mktemp("ray-lost"))
    db = tmp_path / "r.db"
    cfg = config_file(tmp_path, lost_after_s=5.0)
    task = slow_task(tmp_path, 1.0)
    args = [sys.executable, "-m", "evotui.cli", "run", str(task), "--no-ui", "--db", str(db), "--evaluator", "ray",
            "--ray-address", own.address, "--config", str(cfg), "--max-metric-calls", "8", *FAST]
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **RAY_ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while evaluating_worker(tmp_path / "scratch") is None:
            assert proc.poll() is None and time.monotonic() < deadline, "no evaluation started on the cluster"
            time.sleep(0.05)
        own.kill()
        out, err = proc.communicate(timeout=300)
    finally:
        own.kill()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 6, err[-3000:]
    assert "Ray cluster at " + own.address + " is lost" in err
    s = summary_of(subprocess.CompletedProcess(args, 6, out, err))
    assert s["status"] == "interrupted" and s["metric_calls"] < 8
    again = Head(tmp_path_factory.mktemp("ray-again"))
    try:
        more = evotui("resume", s["run_id"], "--db", str(db), "--no-ui", "--ray-address", again.address, "--quiet",
                      env=ray_env(), timeout=300)
    finally:
        again.kill()
    assert more.returncode == 0, more.stderr[-3000:]
    s2 = summary_of(more)
    assert s2["status"] == "completed" and s2["metric_calls"] == 8
    shown = evotui("show", s["run_id"], "--db", str(db), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["open_items"] == 0


HOSTILE = {
    "writes outside scratch": """
def evaluate(p):
    try:
        open({victim!r}, "w").write("pwned")
    except OSError as exc:
        return {{"combined_score": 0.0, "how": "refused: " + type(exc).__name__}}
    return {{"combined_score": 1.0, "how": "written"}}
""",
    "reads the worker's secrets": """
import os
def evaluate(p):
    return {{"combined_score": 1.0, "how": "|".join(k for k in os.environ
                                               if "SECRET" in k or "API_KEY" in k or "TOKEN" in k)}}
""",
    "dials the Ray head": """
import socket
def evaluate(p):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    except OSError as exc:
        return {{"combined_score": 0.0, "how": "refused: " + type(exc).__name__}}
    return {{"combined_score": 1.0, "how": "connected"}}
""",
    "never returns": """
def evaluate(p):
    while True:
        pass
""",
}


def test_hostile_evaluators_are_contained_on_ray_as_locally(head, tmp_path, monkeypatch):
    from engine.evaluator import LocalEvaluator
    from engine.evaluator.ray_backend import RayEvaluator
    from engine.sandbox import Sandbox, SandboxLimits
    from engine.config.service import EvaluatorConfig

    limits = SandboxLimits(wall_s=3, memory_mb=1024)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    keys = frozenset({"SECRET_API_KEY"})
    local = LocalEvaluator(Sandbox(limits, scratch_root=scratch, secret_vars=keys))
    for k, v in RAY_ENV.items():
        monkeypatch.setenv(k, v)
    remote = RayEvaluator(EvaluatorConfig(backend="ray", address=head.address, scratch_root=str(scratch)),
                          limits, keys)

    async def both() -> dict:
        out = {}
        for name, text in HOSTILE.items():
            task = tmp_path / name.replace(" ", "_").replace("'", "")
            task.mkdir()
            (task / "evaluator.py").write_text(text.format(victim=str(tmp_path / f"victim-{task.name}"),
                                                           port=head.port))
            out[name] = (await local.evaluate(task / "evaluator.py", "x = 1\n"),
                         await remote.evaluate(task / "evaluator.py", "x = 1\n"))
        await remote.aclose()
        return out

    results = asyncio.run(both())
    for name, (here, there) in results.items():
        assert (here.ok, here.timed_out, here.score) == (there.ok, there.timed_out, there.score), name
        assert here.feedback == there.feedback, name
    assert not list(tmp_path.glob("victim-*"))
    assert results["reads the worker's secrets"][1].feedback["how"] == ""
    assert results["dials the Ray head"][1].feedback["how"].startswith("refused")
    assert results["never returns"][1].timed_out and "timeout" in results["never returns"][1].reason
    assert not [p for p in scratch.iterdir() if p.name.startswith("evotui-eval-")]


def test_without_an_address_a_local_ray_instance_lives_as_long_as_the_run(tmp_path_factory, tmp_path):
    ray_tmp = tmp_path_factory.mktemp("rl")
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(tmp_path / "r.db"), "--evaluator", "ray",
                  "--config", str(config_file(tmp_path, local_num_cpus=1)), "--max-metric-calls", "3", *FAST,
                  env={**RAY_ENV, "RAY_TMPDIR": str(ray_tmp)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = summary_of(proc)
    assert s["status"] == "completed" and s["metric_calls"] == 3
    assert s["evaluator"]["address"] == "local" and s["evaluator"]["limit"] == 1
    assert any(ray_tmp.iterdir()), "the local instance did not keep its files under RAY_TMPDIR"

    def leftovers() -> list[int]:
        return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and str(ray_tmp) in _cmdline(int(p.name))]

    deadline = time.monotonic() + 60
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers() == [], "processes of the run's Ray instance outlived the run"


def test_an_unreachable_cluster_is_a_clear_error(tmp_path):
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(tmp_path / "r.db"), "--ray-address",
                  f"127.0.0.1:{free_port()}", "--max-proposals", "2", *FAST, env=ray_env(), timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot reach the Ray cluster at 127.0.0.1:" in proc.stderr


def test_an_evaluation_whose_worker_keeps_dying_fails_with_the_reason(head, tmp_path, monkeypatch):
    from engine.evaluator.ray_backend import RayEvaluator
    from engine.sandbox import SandboxLimits
    from engine.config.service import EvaluatorConfig

    for k, v in RAY_ENV.items():
        monkeypatch.setenv(k, v)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    task = tmp_path / "sleepy"
    task.mkdir()
    (task / "evaluator.py").write_text("import time\ndef evaluate(p):\n    time.sleep(120)\n"
                                       "    return {'combined_score': 1.0}\n")
    remote = RayEvaluator(EvaluatorConfig(backend="ray", address=head.address, scratch_root=str(scratch),
                                          max_retries=1), SandboxLimits(wall_s=150), frozenset())
    kills: list[int] = []

    async def killer() -> None:
        while len(kills) < 2:  # each attempt's worker, once it is evaluating
            pid = evaluating_worker(scratch)
            if pid is not None and pid not in kills:
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)
            await asyncio.sleep(0.05)

    async def go():
        hunt = asyncio.ensure_future(killer())
        try:
            return await remote.evaluate(task / "evaluator.py", "x = 1\n")
        finally:
            hunt.cancel()
            await remote.aclose()

    res = asyncio.run(go())
    assert len(kills) == 2 and not res.ok
    assert "died 2 times; gave up after 1 retries" in res.reason
    assert remote.retried == 1 and remote.gave_up == 1


def _session(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return 0


def test_a_node_lost_mid_evaluation_moves_its_work_to_the_other(tmp_path_factory, tmp_path):
    own = Head(tmp_path_factory.mktemp("ray-two"), cpus=1)
    node = own.join()
    try:
        args = [sys.executable, "-m", "evotui.cli", "run", str(slow_task(tmp_path, 1.5)), "--no-ui", "--db",
                str(tmp_path / "r.db"), "--evaluator", "ray", "--ray-address", own.address, "--config",
                str(config_file(tmp_path)), "--max-metric-calls", "6", *FAST]
        run = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **RAY_ENV}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while True:  # until an evaluation runs on the second node (its raylet is in the node's session)
            worker = evaluating_worker(tmp_path / "scratch")
            if worker is not None and _session(_parent(worker)) == node.pid:
                break
            assert run.poll() is None and time.monotonic() < deadline, "no evaluation ran on the second node"
            time.sleep(0.05)
        # The machine dies: its raylet and the rest of its session, and the worker (a session of its own).
        _kill_session(node)
        os.kill(worker, signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        _kill_session(node)
        own.kill()
    assert run.returncode == 0, err[-3000:]
    s = summary_of(subprocess.CompletedProcess(args, 0, out, err))
    assert s["status"] == "completed" and s["metric_calls"] == 6 and s["budget_spent"]["metric_calls"] == 6
    ev = s["evaluator"]
    assert ev["retried"] >= 1 and ev["gave_up"] == 0 and ev["lost"] == ""
