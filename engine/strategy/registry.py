"""Named strategies: each module registers a factory; runs choose one by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.strategy.protocols import SearchParams, Strategy

Factory = Callable[[SearchParams], Strategy]

DEFAULT_FOR_KIND = {"prompt": "gepa", "program": "openevolve", "adapter": "gepa"}
"""The strategy a run gets when it names none: what each task kind always ran."""


class UnknownStrategy(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    name: str
    summary: str
    factory: Factory


_REGISTRY: dict[str, Entry] = {}


def register(name: str, summary: str) -> Callable[[Factory], Factory]:
    """Decorator: `@register("name", "one line")` on a factory SearchParams -> Strategy."""

    def wrap(factory: Factory) -> Factory:
        if name in _REGISTRY:
            raise ValueError(f"strategy {name!r} is registered twice")
        _REGISTRY[name] = Entry(name, summary, factory)
        return factory

    return wrap


def _builtin() -> None:
    # The shipped strategies register on import; imported here, not at the top, because they
    # import this module.
    import engine.strategy.builtin  # noqa: F401


def entries() -> list[Entry]:
    _builtin()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def build(name: str | None, kind: str, params: SearchParams) -> Strategy:
    """The strategy called `name` (None: the kind's default), built with `params`."""
    _builtin()
    chosen = name or DEFAULT_FOR_KIND[kind]
    entry = _REGISTRY.get(chosen)
    if entry is None:
        raise UnknownStrategy(f"unknown strategy {chosen!r}; strategies are {', '.join(sorted(_REGISTRY))} "
                              "(`evotui strategies` describes them)")
    return entry.factory(params)
