"""Metric of the rules task: the hidden house rules live in engine/tasks/ruleworld.py."""

from engine.tasks.ruleworld import score as _score


def score(example: dict, output: str) -> dict:
    """{"score": fraction of applicable house rules met, "feedback": what went wrong}."""
    return _score(example, output)
