"""The evaluator service: what the evaluate stage of a program task calls.

Two implementations with one contract (evaluate -> EvalResult, figures, aclose):
- LocalEvaluator: sandbox subprocesses on this machine (engine/sandbox), at most
  [program] eval_concurrency at once.
- RayEvaluator (engine/evaluator/ray_backend.py): the same sandbox inside Ray tasks.
engine/evaluator/choice.py builds the one [evaluator] asks for.

A service that can no longer reach where evaluations run raises EvaluatorLost; the stage turns
it into a resumable stop (exit code EXIT_EVALUATOR_LOST, run status "interrupted").
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol

from engine.sandbox import EvalResult, Sandbox, SandboxLimits

EXIT_EVALUATOR_LOST = 6
"""Exit code of a run stopped because its evaluation cluster went away (resume continues it)."""


class EvaluatorLost(Exception):
    """Evaluations cannot run any more (the Ray cluster is gone); the message says what to do."""


class EvaluatorSetupError(Exception):
    """Evaluations cannot run there at all (no connection, no node with the resources, a task
    folder too large to send); the message names the setting to change."""


class EvaluatorService(Protocol):
    async def evaluate(self, evaluator: Path, program_text: str, *, mode: str = "openevolve",
                       cascade: bool = False, thresholds: list[float] | None = None,
                       limits: SandboxLimits | None = None, program_name: str = "program.py",
                       on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        """on_stage: a cascade stage that passed with stages still to run, as it ends (the
        sandbox's stage reports); a service that cannot report early never calls it."""
        ...

    def figures(self) -> dict: ...

    async def aclose(self) -> None: ...


class LocalEvaluator:
    """Today's evaluations: the sandbox on the driving machine."""

    backend = "local"

    def __init__(self, sandbox: Sandbox, gpu_note: str = "") -> None:
        self.sandbox = sandbox
        self.gpu_note = gpu_note
        """Why there are no GPU slots though gpus = "auto" asked for them."""

    async def evaluate(self, evaluator: Path, program_text: str, *, mode: str = "openevolve",
                       cascade: bool = False, thresholds: list[float] | None = None,
                       limits: SandboxLimits | None = None, program_name: str = "program.py",
                       on_stage: Callable[[dict], None] | None = None) -> EvalResult:
        return await self.sandbox.evaluate(evaluator, program_text, mode=mode, cascade=cascade,
                                           thresholds=thresholds, limits=limits, program_name=program_name,
                                           on_stage=on_stage)

    def figures(self) -> dict:
        sb = self.sandbox
        out = {"backend": self.backend, "sandbox": sb.note, "concurrency": sb.concurrency,
               "running": sb.running, "completed": sb.completed}
        if sb.gpu_slots is not None:
            out["gpu_slots"] = sb.gpu_slots.figures()
        elif self.gpu_note:
            out["gpu_slots"] = {"note": self.gpu_note}
        return out

    async def aclose(self) -> None:
        return None

