"""Search strategies as plug-ins (protocols.py: the parts; registry.py: names -> factories)."""

from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import UnknownStrategy, build, entries

__all__ = ["SearchParams", "Strategy", "UnknownStrategy", "build", "entries"]
