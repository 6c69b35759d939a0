"""Views rebuilt only when their key (e.g. the pool version) changed, so a sampler tick that
finds the pool unchanged costs nothing."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from engine.strategy.islands_view import IslandsView, build_islands_view
from engine.pool import Artifact


class Cached:
    """A value rebuilt only when its key changed (e.g. the pool version)."""

    def __init__(self) -> None:
        self._key: object = None
        self._value: Any = None

    def get(self, key: object, build: Callable[[], Any]) -> Any:
        if key != self._key:
            self._value = build()
            self._key = key
        return self._value


class IslandsCache:
    """The islands view rebuilt only when the pool changed (the fold is linear in the artifacts)."""

    def __init__(self) -> None:
        self._key: object = None
        self._view: IslandsView | None = None

    def get(self, key: object, strategy: Mapping[str, Any], artifacts: Callable[[], Iterable[Artifact]],
            descriptors: Any = None) -> IslandsView | None:
        """descriptors: the task's declared grid axes (engine/strategy/descriptors.py), None: the default."""
        if key != self._key:
            self._view = build_islands_view(strategy, artifacts(), descriptors)
            self._key = key
        return self._view
