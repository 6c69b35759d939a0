"""Metric of the overrides task: the hidden rules and their exceptions live in engine/tasks/overrideworld.py."""

from engine.tasks.overrideworld import score as _score


def score(example: dict, output: str) -> dict:
    """{"score": fraction of the four style points met, "feedback": one sentence per miss}."""
    return _score(example, output)
