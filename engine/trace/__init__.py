"""EvoTrace: a run as portable JSONL objects (export, import) and the analyses and replays built on
them (analyze/, replay.py). Object types and field meanings: schemas/*.json and README "Commands"."""

from engine.trace.errors import TraceError

__all__ = ["TraceError"]
