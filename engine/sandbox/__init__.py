"""Evaluator sandbox: subprocess per evaluation with limits, scrubbed env and JSON results."""

from engine.sandbox.core import SUPPORT_DIR, EvalResult, Sandbox, SandboxLimits
from engine.sandbox.isolation import Isolation, detect, scrubbed_env

__all__ = ["EvalResult", "Isolation", "SUPPORT_DIR", "Sandbox", "SandboxLimits", "detect", "scrubbed_env"]
