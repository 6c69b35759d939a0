"""Search strategies as plug-ins (protocols.py: the parts; registry.py: names -> factories).

Importing the package registers the shipped strategies (builtin.py) before any name is looked up:
Python runs this file before any of its modules, so every path to the registry passes here.
"""

from engine.strategy import builtin  # noqa: F401  (registration of the shipped strategies)
from engine.strategy.protocols import SearchParams, Strategy
from engine.strategy.registry import UnknownStrategy, build, entries

__all__ = ["SearchParams", "Strategy", "UnknownStrategy", "build", "entries"]
