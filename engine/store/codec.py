"""Conversion between Python values and SQLite columns.

Values are checked when an op is enqueued, so a bad value fails at the caller's line instead of
later inside the writer task.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from typing import Any

from .errors import StoreError

Param = int | float | str | bytes | None
_PLAIN = (int, float, str, bytes, type(None))


def dumps(value: Any, *, column: str) -> str | None:
    """JSON text with sorted keys, so equal values give equal text; None stays NULL.

    For arguments named `*_json` a str is JSON text already (e.g. a pydantic model_dump_json())
    and is parsed and normalised; for other arguments a str is just a JSON string value.
    """
    if value is None:
        return None
    if isinstance(value, str) and column.endswith("_json"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{column}: string is not JSON text ({exc}); pass a dict instead") from exc
    elif hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value, sort_keys=True, allow_nan=False, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{column}: value cannot be stored as JSON ({exc})") from exc


def _json_default(value: Any) -> Any:
    # numpy scalars and similar number-likes; anything else is the caller's bug.
    if hasattr(value, "__index__"):
        return int(value.__index__())
    if hasattr(value, "__float__"):
        number = float(value)
        if math.isfinite(number):
            return number
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def param(value: Any, *, column: str) -> Param:
    """A value sqlite3 accepts; number-likes (numpy) are converted, other objects refused."""
    if isinstance(value, _PLAIN):
        return value
    if hasattr(value, "__index__"):
        return int(value.__index__())
    if hasattr(value, "__float__"):
        return float(value)
    raise StoreError(f"{column}: cannot store a {type(value).__name__} (expected number, text or None)")


def params(columns: tuple[str, ...], values: tuple[Any, ...]) -> tuple[Param, ...]:
    return tuple(param(v, column=c) for c, v in zip(columns, values, strict=True))


def decode_row(row: sqlite3.Row, *, drop: tuple[str, ...] = ("run_id",)) -> dict[str, Any]:
    """A row as a dict; `x_json` columns become `x` holding the decoded value."""
    out: dict[str, Any] = {}
    for key, value in zip(row.keys(), row, strict=True):  # iterating a Row yields values only
        if key in drop:
            continue
        if key.endswith("_json"):
            out[key[: -len("_json")]] = loads(value)
        else:
            out[key] = value
    return out
