"""The [strategy] section of a run's configuration: which search strategy, and one table per
strategy that declares options (`[strategy.NAME]`), each validated by the model its strategy
module registers (engine/strategy/registry.py), plug-ins' included."""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ConfigDict, ValidationError, model_validator

from engine.config.service import StrictModel


def _option_models() -> dict:
    # Imported on use: the registry loads every strategy and plug-in, which a config import need not.
    from engine.strategy.registry import option_models

    return option_models()


class StrategyConfig(StrictModel):
    # The tables are known only once the strategies are loaded, so pydantic lets extra keys in and
    # the validator below refuses every key that is not a strategy with options (as extra="forbid").
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    name: str | None = None
    """The search strategy (`evotui strategies` lists them): parent selection, context, proposal
    operators, acceptance and archive. None: the task kind's default (prompt: gepa, program:
    openevolve)."""

    @model_validator(mode="after")
    def _tables(self) -> "StrategyConfig":
        models = _option_models()
        extra = self.__pydantic_extra__ if self.__pydantic_extra__ is not None else {}
        for key in list(extra):
            if key not in models:
                raise ValidationError.from_exception_data(
                    "StrategyConfig", [{"type": "extra_forbidden", "loc": (key,), "input": extra[key]}])
        for key, model in models.items():
            try:
                value = extra.get(key, {})
                extra[key] = value if isinstance(value, model) else model.model_validate(value)
            except ValidationError as err:
                raise ValidationError.from_exception_data("StrategyConfig", [
                    {"type": e["type"], "loc": (key, *e["loc"]), "input": e["input"], **({"ctx": e["ctx"]} if "ctx" in e else {})}
                    for e in err.errors()]) from None
        return self

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema, handler):
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        for key, model in _option_models().items():
            target.setdefault("properties", {})[key] = handler(model.__pydantic_core_schema__)
        target["additionalProperties"] = False
        return schema


ADDED_SINCE_STORED = {"loongflow": {"migration_trigger": "interval"}}
"""[strategy] settings added after earlier releases stored their runs, with the behaviour those
runs had: a stored table that lacks one ran with this value (a resumed or inspected run keeps it)."""


def upgrade_stored_strategy(strategy: Mapping[str, Any]) -> dict:
    """A stored run config's strategy table with the settings it predates filled in as it ran."""
    out = dict(strategy)
    for table, added in ADDED_SINCE_STORED.items():
        if isinstance(out.get(table), Mapping):
            out[table] = {**added, **out[table]}
    return out

