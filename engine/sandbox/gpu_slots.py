"""GPU slots for local evaluations: each evaluation leases one slot and sees only its GPU.

[evaluator] gpus names the devices ("auto": NVIDIA_VISIBLE_DEVICES, else nvidia-smi), and
evals_per_gpu how many evaluations share one. A lease picks a free slot on the least busy GPU and
is returned on every exit path (the lease is a context manager around the whole evaluation, so a
timeout, a kill, a crash and a cancellation all return it). The evaluation's environment then
names only that device (CUDA_VISIBLE_DEVICES; for ROCm ROCR_VISIBLE_DEVICES, with HIP/CUDA
indices 0 inside it), points the compile caches (Triton, TorchInductor, JAX/XLA, CUDA, MIOpen) at
directories of its own and, where a framework honours one, caps its share of GPU memory.

No pydantic here: Ray workers import engine.sandbox.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
"""Every variable that selects devices: all are replaced, so no engine setting leaks through."""

CACHE_VARS = {
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "JAX_COMPILATION_CACHE_DIR": "jax",
    "CUDA_CACHE_PATH": "cuda",
    "MIOPEN_USER_DB_PATH": "miopen",
    "MIOPEN_CUSTOM_CACHE_DIR": "miopen",
}
"""Compile caches that two evaluations sharing one directory would race on."""

CACHE_DIR = ".gpu-cache"
"""Under the evaluation's scratch: the only place every confinement mode lets it write."""


class GpuSetupError(Exception):
    """The declared devices cannot be used; the message names the setting to change."""


@dataclass(frozen=True)
class Slot:
    index: int
    device: str

    @property
    def label(self) -> str:
        return f"gpu{self.device}#{self.index}"


def detect_devices(environ: dict[str, str] | None = None, smi: str | None = "nvidia-smi") -> list[str]:
    """The GPUs "auto" means: NVIDIA_VISIBLE_DEVICES (a container's grant) when it names devices,
    else what nvidia-smi lists, else none."""
    env = os.environ if environ is None else environ
    granted = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if granted and granted.lower() not in ("all", "none", "void"):
        return [d.strip() for d in granted.split(",") if d.strip()]
    exe = shutil.which(smi) if smi else None
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()]


class GpuSlots:
    """Slots = devices x per_gpu; lease() hands out one, spread over the GPUs."""

    def __init__(self, devices: list[str], per_gpu: int = 1, vendor: str = "cuda",
                 memory_fraction: float | None = None) -> None:
        if not devices:
            raise GpuSetupError("[evaluator] gpus lists no device: name at least one, or leave gpus unset")
        if len(set(devices)) != len(devices):
            raise GpuSetupError(f"[evaluator] gpus lists a device twice: {devices}")
        if per_gpu < 1:
            raise GpuSetupError("[evaluator] evals_per_gpu must be at least 1")
        if vendor not in ("cuda", "rocm"):
            raise GpuSetupError(f'[evaluator] gpu_vendor must be "cuda" or "rocm", not {vendor!r}')
        self.devices = list(devices)
        self.per_gpu = per_gpu
        self.vendor = vendor
        # Sharing a GPU: JAX would preallocate 75% of it per process; split it unless told.
        self.memory_fraction = memory_fraction if memory_fraction is not None else (
            round(0.9 / per_gpu, 3) if per_gpu > 1 else None)
        self.slots = [Slot(i, d) for i, d in enumerate(d for _ in range(per_gpu) for d in devices)]
        self._free = list(self.slots)
        self._busy: set[Slot] = set()
        self._sem = asyncio.Semaphore(len(self.slots))
        self._last_taken = {s: s.index - len(self.slots) for s in self.slots}
        self.leases = 0

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def busy(self) -> list[Slot]:
        return sorted(self._busy, key=lambda s: s.index)

    def _take(self) -> Slot:
        load = Counter(s.device for s in self._busy)
        # Least busy GPU first, then the slot idle longest: one evaluation at a time rotates GPUs.
        slot = min(self._free, key=lambda s: (load[s.device], self._last_taken[s]))
        self._free.remove(slot)
        self._busy.add(slot)
        self._last_taken[slot] = self.leases
        self.leases += 1
        return slot

    def _give_back(self, slot: Slot) -> None:
        self._busy.discard(slot)
        self._free.append(slot)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[Slot]:
        """A free slot for the body; waits while all are busy. Taking and giving back never await,
        so a cancellation cannot land between holding a slot and its release."""
        async with self._sem:
            slot = self._take()
            try:
                yield slot
            finally:
                self._give_back(slot)

    def env(self, slot: Slot, scratch: Path) -> dict[str, str]:
        """Variables for an evaluation on `slot`. The cache directories are only named: the frameworks
        make them, as the evaluation's own user (uid mode hands it only scratch's top level)."""
        out: dict[str, str] = {}
        if self.vendor == "rocm":
            # ROCR filters the devices first; HIP and CUDA indices then count within that one.
            out.update(ROCR_VISIBLE_DEVICES=slot.device, HIP_VISIBLE_DEVICES="0", CUDA_VISIBLE_DEVICES="0",
                       GPU_DEVICE_ORDINAL="0")
        else:
            out.update(CUDA_VISIBLE_DEVICES=slot.device, CUDA_DEVICE_ORDER="PCI_BUS_ID")
        root = scratch / CACHE_DIR / f"slot-{slot.index}"
        for var, sub in CACHE_VARS.items():
            out[var] = str(root / sub)
        out["EVOTUI_GPU_SLOT"] = str(slot.index)
        out["EVOTUI_GPU_DEVICE"] = slot.device
        if self.memory_fraction is not None:
            # JAX honours this; PyTorch has no variable for it: evaluators may call
            # torch.cuda.set_per_process_memory_fraction(float(os.environ["EVOTUI_GPU_MEMORY_FRACTION"])).
            out["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{self.memory_fraction:g}"
            out["EVOTUI_GPU_MEMORY_FRACTION"] = f"{self.memory_fraction:g}"
            out["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        return out

    def figures(self) -> dict:
        load = Counter(s.device for s in self._busy)
        return {"gpus": list(self.devices), "vendor": self.vendor, "per_gpu": self.per_gpu, "slots": len(self.slots),
                "busy": len(self._busy), "by_gpu": {d: load[d] for d in self.devices},
                "memory_fraction": self.memory_fraction, "leases": self.leases}


def build_slots(gpus: str | list[str] | None, per_gpu: int = 1, vendor: str = "cuda",
                memory_fraction: float | None = None) -> tuple[GpuSlots | None, str]:
    """(the slots [evaluator] gpus asks for or None, a note when "auto" found nothing)."""
    if gpus is None:
        return None, ""
    if gpus == "auto":
        devices = detect_devices()
        if not devices:
            return None, ('gpus = "auto" found no GPU (no NVIDIA_VISIBLE_DEVICES list, no nvidia-smi): '
                          "evaluations run without GPU slots")
    else:
        devices = [str(d) for d in gpus]
    return GpuSlots(devices, per_gpu, vendor, memory_fraction), ""


def strip_device_vars(env: dict[str, str]) -> dict[str, str]:
    """The engine's own device selection does not reach an evaluation that has a slot."""
    return {k: v for k, v in env.items() if k not in DEVICE_VARS}
