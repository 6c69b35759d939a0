"""Evaluator sandbox: a confined runner process per evaluation, limits, scrubbed env, results over a pipe."""

from engine.sandbox.core import SUPPORT_DIR, Sandbox, SandboxLimits
from engine.sandbox.isolation import Isolation, detect, scrubbed_env
from engine.sandbox.results import EvalResult

__all__ = ["EvalResult", "Isolation", "SUPPORT_DIR", "Sandbox", "SandboxLimits", "detect", "scrubbed_env"]
