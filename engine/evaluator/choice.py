"""Which evaluator service a run gets: the one its [evaluator] section asks for.

Apart from engine/evaluator/service.py because the Ray backend builds on the service (its errors
and contract): choosing between the two sits above both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.evaluator.service import EvaluatorService, EvaluatorSetupError, LocalEvaluator
from engine.sandbox import Sandbox, SandboxLimits
from engine.sandbox.gpu_slots import GpuSetupError, build_slots

if TYPE_CHECKING:  # the Ray workers import this package: it stays free of pydantic at run time
    from engine.config.service import EvaluatorConfig


def build_evaluator(cfg: EvaluatorConfig, limits: SandboxLimits, concurrency: int,
                    secret_vars: frozenset[str]) -> EvaluatorService:
    """The service [evaluator] asks for. Ray is imported only when backend = "ray"."""
    if cfg.backend == "ray":
        from engine.evaluator.ray_backend import RayEvaluator  # ray and pydantic: only for this backend

        return RayEvaluator(cfg, limits, secret_vars)
    try:
        slots, note = build_slots(cfg.gpus, cfg.evals_per_gpu, cfg.gpu_vendor, cfg.gpu_memory_fraction)
    except GpuSetupError as exc:
        raise EvaluatorSetupError(str(exc)) from None
    sandbox = Sandbox(limits, concurrency=concurrency, secret_vars=secret_vars, gpu_slots=slots)
    return LocalEvaluator(sandbox, note)
