"""GPU slots: no two evaluations share a slot, every slot comes back, each evaluation sees one device."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EvaluatorConfig
from engine.evaluator import build_evaluator
from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.gpu_slots import GpuSetupError, GpuSlots, build_slots, detect_devices

# What each job does while it holds a slot: finish, raise, be cancelled, or outlive a timeout.
ENDINGS = st.sampled_from(["ok", "crash", "cancel", "timeout"])


@settings(max_examples=60, deadline=None)
@given(gpus=st.integers(1, 3), per_gpu=st.integers(1, 3),
       jobs=st.lists(st.tuples(ENDINGS, st.integers(0, 4)), min_size=1, max_size=25))
def test_no_slot_is_shared_and_every_slot_comes_back(gpus, per_gpu, jobs):
    slots = GpuSlots([str(i) for i in range(gpus)], per_gpu)
    holders: dict[int, int] = {}
    peak = 0

    async def job(n: int, ending: str, steps: int):
        nonlocal peak
        async with slots.lease() as slot:
            assert slot.index not in holders, f"slot {slot.index} held by job {holders.get(slot.index)} and {n}"
            holders[slot.index] = n
            peak = max(peak, len(holders))
            try:
                for _ in range(steps):
                    await asyncio.sleep(0)  # yield: other jobs interleave, no wall time involved
                if ending == "crash":
                    raise RuntimeError("evaluation crashed")
                if ending in ("cancel", "timeout"):
                    await asyncio.Event().wait()  # never ends by itself
            finally:
                del holders[slot.index]

    async def main():
        tasks = [asyncio.ensure_future(job(n, e, s)) for n, (e, s) in enumerate(jobs)]
        for _ in range(30):  # let jobs take slots, then end the stuck ones
            await asyncio.sleep(0)
        for t, (ending, _) in zip(tasks, jobs):
            if ending in ("cancel", "timeout"):
                t.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for r, (ending, _) in zip(results, jobs):
            if ending == "ok":
                assert r is None
            elif ending == "crash":
                assert isinstance(r, RuntimeError)
            else:
                assert isinstance(r, asyncio.CancelledError)

    asyncio.run(main())
    assert holders == {}
    assert slots.busy == [] and len(slots._free) == gpus * per_gpu
    assert peak <= gpus * per_gpu
    # Every job that ran to an end held a slot; a cancelled one may have been waiting for one.
    assert sum(1 for e, _ in jobs if e in ("ok", "crash")) <= slots.leases <= len(jobs)


def test_leases_spread_over_gpus_first():
    slots = GpuSlots(["0", "1"], per_gpu=2)

    async def main():
        async with slots.lease() as a, slots.lease() as b:
            assert {a.device, b.device} == {"0", "1"}
            assert slots.figures()["by_gpu"] == {"0": 1, "1": 1}

    asyncio.run(main())


def test_env_names_one_device_and_own_caches(tmp_path: Path):
    slots = GpuSlots(["3", "5"], per_gpu=2)
    env = slots.env(slots.slots[1], tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "5"
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.45"  # two per GPU share its memory
    other = slots.env(slots.slots[3], tmp_path)
    for var in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "CUDA_CACHE_PATH"):
        assert env[var].startswith(str(tmp_path)) and env[var] != other[var]
    rocm_slots = GpuSlots(["2"], vendor="rocm")
    rocm = rocm_slots.env(rocm_slots.slots[0], tmp_path)
    assert rocm["ROCR_VISIBLE_DEVICES"] == "2" and rocm["HIP_VISIBLE_DEVICES"] == "0"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in rocm  # one per GPU: the framework's default


def test_detect_devices(tmp_path: Path):
    assert detect_devices({"NVIDIA_VISIBLE_DEVICES": "1,3"}, smi=None) == ["1", "3"]
    fake = tmp_path / "fake-smi"
    fake.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert detect_devices({"NVIDIA_VISIBLE_DEVICES": "all"}, smi=str(fake)) == ["0", "1"]
    assert detect_devices({}, smi=str(tmp_path / "absent")) == []


def test_bad_declarations():
    with pytest.raises(GpuSetupError, match="twice"):
        GpuSlots(["0", "0"])
    with pytest.raises(ValueError, match="num_gpus"):
        EvaluatorConfig(backend="ray", gpus=["0"])
    with pytest.raises(ValueError, match="twice"):
        EvaluatorConfig(gpus=[0, "0"])
    assert EvaluatorConfig(gpus=[0, 1]).gpus == ["0", "1"]
    assert build_slots(None) == (None, "")


EVALUATOR = """import os, time
def evaluate(path):
    seen = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    caches = {os.environ.get(v, "") for v in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    os.makedirs(os.environ["TRITON_CACHE_DIR"])  # the evaluation can make its cache directory
    time.sleep(float(open(path).read().strip() or 0))
    return {"combined_score": 1.0, "device": float(seen) if seen.isdigit() else -1.0,
            "devices_seen": float(len([d for d in seen.split(",") if d])),
            "own_caches": float(all(c.startswith(os.getcwd()) for c in caches)),
            "slot": float(os.environ["EVOTUI_GPU_SLOT"])}
"""


def test_sandbox_evaluations_each_see_one_device(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # the engine's own setting must not leak
    evaluator = tmp_path / "evaluator.py"
    evaluator.write_text(EVALUATOR)
    slots = GpuSlots(["0", "1"], per_gpu=2)
    sandbox = Sandbox(SandboxLimits(wall_s=20, memory_mb=1024), concurrency=4, scratch_root=tmp_path,
                      gpu_slots=slots)

    async def main():
        return await asyncio.gather(*(sandbox.evaluate(evaluator, "0.3") for _ in range(6)))

    results = asyncio.run(main())
    assert all(r.ok for r in results), [r.reason for r in results]
    assert all(r.metrics["devices_seen"] == 1.0 for r in results)
    assert {r.metrics["device"] for r in results} == {0.0, 1.0}
    assert all(r.metrics["own_caches"] == 1.0 for r in results)
    assert slots.busy == [] and slots.leases == 6


def test_timeouts_and_cancels_give_slots_back(tmp_path: Path):
    evaluator = tmp_path / "evaluator.py"
    evaluator.write_text(EVALUATOR)
    slots = GpuSlots(["0"], per_gpu=1)
    sandbox = Sandbox(SandboxLimits(wall_s=1.0, memory_mb=1024), concurrency=2, scratch_root=tmp_path,
                      gpu_slots=slots)

    async def main():
        timed_out = await sandbox.evaluate(evaluator, "60")
        assert timed_out.timed_out and slots.busy == []
        stuck = asyncio.ensure_future(sandbox.evaluate(evaluator, "60"))
        while not slots.busy:
            await asyncio.sleep(0.01)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        assert slots.busy == []
        again = await sandbox.evaluate(evaluator, "0")  # the one slot is free again
        assert again.ok and again.metrics["slot"] == 0.0

    asyncio.run(main())


def test_local_evaluator_reports_slots(tmp_path: Path):
    ev = build_evaluator(EvaluatorConfig(gpus=["0", "1"], evals_per_gpu=2), SandboxLimits(), 4, frozenset())
    fig = ev.figures()["gpu_slots"]
    assert fig["slots"] == 4 and fig["busy"] == 0 and fig["by_gpu"] == {"0": 0, "1": 0}
    assert os.environ.get("EVOTUI_GPU_SLOT") is None
