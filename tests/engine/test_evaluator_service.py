"""The evaluator service's parts that need no cluster: the task folder's journey (pack, unpack),
the backpressure rule, the worker's light imports, the local service."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from engine.evaluator import EvaluatorSetupError, LocalEvaluator, build_evaluator
from engine.evaluator.ray_backend import capacity
from engine.evaluator.shipping import ShippingError, TaskBundle, pack, unpack
from engine.sandbox import SandboxLimits
from engine.config.service import EvaluatorConfig


def _task(root: Path) -> Path:
    task = root / "task"
    (task / "data").mkdir(parents=True)
    (task / "__pycache__").mkdir()
    (task / "evaluator.py").write_text("def evaluate(p):\n    return {'combined_score': 1.0}\n")
    (task / "data" / "table.csv").write_text("a,b\n1,2\n")
    (task / "__pycache__" / "evaluator.cpython-311.pyc").write_bytes(b"\0stale")
    (task / "link").symlink_to("/etc/hostname")
    return task


def test_the_task_folder_travels_whole_without_caches_or_links(tmp_path):
    task = _task(tmp_path)
    bundle = pack(task)
    assert sorted(rel for rel, _, _ in bundle.files) == ["data/table.csv", "evaluator.py"]
    assert pack(task).digest == bundle.digest
    where = unpack(bundle, tmp_path / "worker")
    assert (where / "data" / "table.csv").read_text() == "a,b\n1,2\n"
    assert unpack(bundle, tmp_path / "worker") == where  # once per machine
    (task / "evaluator.py").write_text("def evaluate(p):\n    return {'combined_score': 2.0}\n")
    assert pack(task).digest != bundle.digest
    assert [p.name for p in (tmp_path / "worker").iterdir()] == [where.name]  # no staging left behind


def test_unsafe_names_and_oversized_folders_are_refused(tmp_path):
    with pytest.raises(ShippingError, match="not a plain relative path"):
        unpack(TaskBundle("d1", (("../escape.py", b"x", 0o644),)), tmp_path / "w")
    assert not (tmp_path / "escape.py").exists()
    with pytest.raises(ShippingError, match="over 0 MB"):
        pack(_task(tmp_path), max_bytes=10)


@pytest.mark.parametrize("needs, total, available, running, cap, expected", [
    ({"CPU": 1}, {"CPU": 8}, {"CPU": 8}, 0, None, 8),
    ({"CPU": 1}, {"CPU": 8}, {"CPU": 2}, 3, None, 5),  # other jobs hold 3 CPUs
    ({"CPU": 1}, {"CPU": 8}, {}, 8, None, 8),  # all ours, all busy: keep them
    ({"CPU": 2, "GPU": 0.5}, {"CPU": 16, "GPU": 2}, {"CPU": 16, "GPU": 2}, 0, None, 4),
    ({"CPU": 1}, {"CPU": 64}, {"CPU": 64}, 0, 10, 10),
    ({}, {"CPU": 4}, {"CPU": 0}, 0, None, 4),
    ({"CPU": 1}, {"CPU": 4}, {}, 0, None, 1),  # nothing free now: one waits in Ray's queue
])
def test_concurrency_follows_the_clusters_resources(needs, total, available, running, cap, expected):
    assert capacity(needs, total, available, running, cap) == expected


def test_a_cluster_without_the_resources_is_a_setup_error():
    with pytest.raises(EvaluatorSetupError, match="lower \\[evaluator\\] num_gpus"):
        capacity({"CPU": 1, "GPU": 1}, {"CPU": 8}, {"CPU": 8}, 0, None, "h:1")


def test_the_workers_imports_need_no_pydantic_and_no_ray():
    code = ("import sys, engine.evaluator.ray_worker\n"
            "print(sorted(m for m in ('pydantic', 'ray', 'textual', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


def test_the_local_service_is_the_sandbox(tmp_path):
    ev = build_evaluator(EvaluatorConfig(), SandboxLimits(wall_s=20), 2, frozenset())
    assert isinstance(ev, LocalEvaluator)
    ev.sandbox.scratch_root = str(tmp_path)
    res = asyncio.run(ev.evaluate(_task(tmp_path) / "evaluator.py", "x = 1\n"))
    assert res.ok and res.score == 1.0
    f = ev.figures()
    assert f["backend"] == "local" and f["completed"] == 1 and f["concurrency"] == 2 and f["sandbox"]


def test_scratch_of_a_dead_worker_is_swept_once_its_wall_clock_is_over(tmp_path):
    import os
    import time

    from engine.evaluator.ray_worker import sweep_orphans

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old, fresh, alive = (tmp_path / f"evotui-eval-{dead.pid}-ab12-x1", tmp_path / f"evotui-eval-{dead.pid}-ab12-x2",
                         tmp_path / f"evotui-eval-{os.getpid()}-cd34-x3")
    for d in (old, fresh, alive):
        d.mkdir()
    now = time.time()
    os.utime(old, (now - 500, now - 500))
    os.utime(alive, (now - 500, now - 500))
    assert sweep_orphans(tmp_path, 100, now=now) == [old.name]
    assert not old.exists() and fresh.exists() and alive.exists()
