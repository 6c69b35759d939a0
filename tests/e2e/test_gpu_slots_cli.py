"""A run with two declared GPUs and four parallel evaluations: each evaluation saw exactly one device,
never more than evals_per_gpu at once on one GPU, and the summary shows the slots (all free at the end)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.e2e.conftest import ROOT, evotui, read_rows, summary_of

WRAPPER = '''"""circle_packing's evaluator plus what the evaluation saw of the GPUs."""
import os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import base_evaluator


def evaluate(program_path):
    start = time.time()
    out = base_evaluator.evaluate(program_path)
    time.sleep(0.2)  # long enough for evaluations to overlap
    seen = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    out["seen_devices"] = float(len([d for d in seen.split(",") if d]))
    out["seen_device"] = float(seen) if seen.isdigit() else -1.0
    out["t_start"], out["t_end"] = start, time.time()
    return out
'''


def _task(tmp_path: Path) -> Path:
    task = tmp_path / "gpu_task"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    (task / "evaluator.py").rename(task / "base_evaluator.py")
    (task / "evaluator.py").write_text(WRAPPER)
    toml = (task / "task.toml").read_text().replace("eval_concurrency = 2", "eval_concurrency = 4")
    (task / "task.toml").write_text(toml)
    return task


def test_two_gpus_four_parallel_evaluations(tmp_path: Path, db: Path):
    proc = evotui("run", str(_task(tmp_path)), "--no-ui", "--db", str(db), "--gpus", "0,1", "--evals-per-gpu", "2",
                  "--workers", "evaluate=4", "--max-proposals", "16", "--time-scale", "2000",
                  env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = summary_of(proc)
    slots = summary["evaluator"]["gpu_slots"]
    assert slots["gpus"] == ["0", "1"] and slots["slots"] == 4 and slots["busy"] == 0
    assert slots["leases"] == summary["metric_calls"]
    assert " gpu 0/4 (0:0 1:0)" in proc.stderr  # the last progress line: every slot free
    show = evotui("show", "--db", str(db))
    assert "gpu slots      4 on GPUs 0, 1 (2 per GPU)" in show.stdout, show.stdout[-2000:]
    metrics = []
    for (meta,) in read_rows(db, "SELECT meta_json FROM artifacts"):
        m = json.loads(meta).get("metrics") or {}
        if "seen_devices" in m:
            metrics.append(m)
    assert len(metrics) >= 5, f"too few evaluated artifacts carry metrics: {len(metrics)}"
    assert all(m["seen_devices"] == 1.0 for m in metrics), metrics
    assert {m["seen_device"] for m in metrics} == {0.0, 1.0}
    # At any evaluation's start, at most two evaluations ran on its GPU (evals_per_gpu = 2).
    for m in metrics:
        same = [o for o in metrics if o["seen_device"] == m["seen_device"]
                and o["t_start"] <= m["t_start"] < o["t_end"]]
        assert len(same) <= 2, same
