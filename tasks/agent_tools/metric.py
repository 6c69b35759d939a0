"""Metric of the agent_tools task: the world and its diagnosis live in engine/tasks/agentworld.py."""

from engine.tasks.agentworld import score as _score


def score(example: dict, output: str) -> dict:
    """{"score": share of the five checks met, "feedback": each failed check, naming its component}."""
    return _score(example, output)
