"""The strategies that ship: importing this module registers them (one import per module)."""

from engine.strategy import gepa, loongflow, openevolve  # noqa: F401  (registration)
from engine.strategy import contextevolve  # noqa: F401  (registration)
from engine.strategy import sepl  # noqa: F401  (registration)
