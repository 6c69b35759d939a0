"""Named strategies: each module registers a factory and the model of its own [strategy.NAME]
options; installed packages add theirs through the `evotui.strategies` entry-point group; a
library caller may run a Strategy instance it built (`instance_scope`, evotui.optimize)."""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Iterator, Mapping

from pydantic import BaseModel

from engine.strategy.protocols import SearchParams, Strategy

Factory = Callable[[SearchParams], Strategy]
IslandOptions = Callable[[Mapping[str, Any]], Mapping[str, Any] | None]

ENTRY_POINT_GROUP = "evotui.strategies"
"""An installed package declares `[project.entry-points."evotui.strategies"] NAME = "module"`; the
module registers NAME with `register` when it is imported."""

DEFAULT_FOR_KIND = {"prompt": "gepa", "program": "openevolve", "adapter": "gepa"}
"""The strategy a run gets when it names none: what each task kind always ran."""

CHAIN_MEASURED = {"gepa": frozenset({"prompt", "adapter"}), "openevolve": frozenset({"program"})}
"""The strategy each kind's chain-mode default was measured with (engine/pipeline/modes.py)."""


class UnknownStrategy(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    name: str
    summary: str
    factory: Factory
    options: type[BaseModel] | None = None
    """The model of the strategy's [strategy.NAME] table (extra="forbid"); None: it takes none."""
    island_options: IslandOptions | None = None
    """Given a run's strategy table, the island settings when the strategy runs islands (the
    islands view and `evotui show` draw them), else None."""
    origin: str = "evotui"
    """evotui, or the distribution of the plug-in that registered it."""


_REGISTRY: dict[str, Entry] = {}
_PROBLEMS: list[str] = []
_loaded = False
_origin = "evotui"
_instances: contextvars.ContextVar[Mapping[str, Strategy]] = contextvars.ContextVar("evotui_strategy_instances",
                                                                                   default={})


def register(name: str, summary: str, *, options: type[BaseModel] | None = None,
             island_options: IslandOptions | None = None) -> Callable[[Factory], Factory]:
    """Decorator: `@register("name", "one line", options=Model)` on a factory SearchParams -> Strategy.
    The factory reads its validated table as `params.options[name]` (the model's defaults filled in)."""

    def wrap(factory: Factory) -> Factory:
        if name in _REGISTRY:
            raise ValueError(f"strategy {name!r} is registered twice ({_REGISTRY[name].origin} and {_origin})")
        if options is not None and options.model_config.get("extra") != "forbid":
            raise ValueError(f"strategy {name!r}: its options model must forbid unknown keys (extra='forbid')")
        _REGISTRY[name] = Entry(name, summary, factory, options, island_options, _origin)
        return factory

    return wrap


def _load() -> None:
    """The installed plug-ins, after the shipped strategies (once per process). A plug-in that
    fails to load is recorded (problems()) and left out; the others still run."""
    global _loaded, _origin
    if _loaded:
        return
    _loaded = True
    # The shipped strategies are registered by now: this module is reached only through the package
    # engine.strategy, whose __init__ imports engine/strategy/builtin.py (they build on this module,
    # not it on them).
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ep.value
        if ep.name in _REGISTRY:
            _PROBLEMS.append(f"strategy plug-in {ep.name!r} of {dist} is not loaded: {_REGISTRY[ep.name].origin} "
                             "already has a strategy of that name")
            continue
        _origin = dist
        try:
            ep.load()
        except Exception as exc:  # third-party code: any failure is that plug-in's, reported and skipped
            _PROBLEMS.append(f"strategy plug-in {ep.name!r} of {dist} failed to load ({ep.value}): "
                             f"{type(exc).__name__}: {exc}")
            continue
        finally:
            _origin = "evotui"
        if ep.name not in _REGISTRY:
            _PROBLEMS.append(f"strategy plug-in {ep.name!r} of {dist}: {ep.value} registered no strategy of that "
                             "name (call engine.strategy.registry.register in it)")


def entries() -> list[Entry]:
    _load()
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def problems() -> list[str]:
    """Plug-ins that could not be loaded, one line each."""
    _load()
    return list(_PROBLEMS)


def option_models() -> dict[str, type[BaseModel]]:
    """Strategy name -> the model of its [strategy.NAME] table, for every strategy that has one."""
    return {e.name: e.options for e in entries() if e.options is not None}


def island_options(strategy: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The island settings of a run (its config's strategy table, name resolved) when its
    strategy runs islands, else None."""
    _load()
    entry = _REGISTRY.get(str(strategy.get("name")))
    if entry is None or entry.island_options is None:
        return None
    return entry.island_options(strategy)


def runs_chain_default(name: str | None, kind: str) -> bool:
    """Whether `name` (None: the kind's default) is the strategy chain mode's default was measured
    with on `kind` tasks."""
    return kind in CHAIN_MEASURED.get(name or DEFAULT_FOR_KIND.get(kind, ""), frozenset())


@contextlib.contextmanager
def instance_scope(strategy: Strategy) -> Iterator[None]:
    """Within the block (and the tasks it starts), `build(strategy.name, ...)` returns this
    instance: a library caller's own strategy runs without being registered in the process."""
    token = _instances.set({**_instances.get(), strategy.name: strategy})
    try:
        yield
    finally:
        _instances.reset(token)


def build(name: str | None, kind: str, params: SearchParams) -> Strategy:
    """The strategy called `name` (None: the kind's default), built with `params`."""
    _load()
    chosen = name or DEFAULT_FOR_KIND[kind]
    instance = _instances.get().get(chosen)
    if instance is not None:
        return instance
    entry = _REGISTRY.get(chosen)
    if entry is None:
        broken = [p for p in _PROBLEMS if p.startswith(f"strategy plug-in {chosen!r} ")]
        raise UnknownStrategy(broken[0] if broken else
                              f"unknown strategy {chosen!r}; strategies are {', '.join(sorted(_REGISTRY))} "
                              "(`evotui strategies` describes them)")
    return entry.factory(params)
