"""Evaluator services of program tasks: the local sandbox or Ray tasks (engine/evaluator/service.py)."""

from engine.evaluator.choice import build_evaluator
from engine.evaluator.service import (
    EXIT_EVALUATOR_LOST,
    EvaluatorLost,
    EvaluatorService,
    EvaluatorSetupError,
    LocalEvaluator,
)

__all__ = ["EXIT_EVALUATOR_LOST", "EvaluatorLost", "EvaluatorService", "EvaluatorSetupError", "LocalEvaluator",
           "build_evaluator"]
