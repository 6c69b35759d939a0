"""Prices of LLM calls: a table of dollars per million tokens (engine/pricing/prices.toml, offline,
overridable with a file of the same shape) and, for endpoints that declare GPUs, GPU-seconds.

A model is looked up by its exact name, then case-insensitively, then by its last path segment
("openai/gpt-4o" -> "gpt-4o") and with a date suffix dropped ("gpt-4o-2024-08-06" -> "gpt-4o").
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

SHIPPED = Path(__file__).with_name("prices.toml")
_DATE = re.compile(r"[-@](20\d\d-?\d\d-?\d\d|\d{4})$|-latest$")


class PriceError(Exception):
    """A price file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None
    """None: cached tokens cost as much as other input."""

    def usd(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        cached = min(cached_tokens, prompt_tokens)
        rate = self.input if self.cached_input is None else self.cached_input
        return ((prompt_tokens - cached) * self.input + cached * rate + completion_tokens * self.output) / 1e6


def _read(path: Path) -> dict[str, Price]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceError(f"cannot read the price file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"the price file {path} is not valid TOML: {exc}") from None
    models = data.get("models")
    unknown = set(data) - {"models"}
    if not isinstance(models, dict) or unknown:
        raise PriceError(f"the price file {path} must hold only [models.\"NAME\"] tables "
                         f"(input, output, cached_input in $ per million tokens)")
    out: dict[str, Price] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict) or not {"input", "output"} <= set(entry) or set(entry) - {
                "input", "output", "cached_input"}:
            raise PriceError(f"{path}: [models.\"{name}\"] needs input and output (and optionally cached_input), "
                             f"in $ per million tokens")
        values = [entry.get(k) for k in ("input", "output", "cached_input")]
        if any(v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0) for v in values):
            raise PriceError(f"{path}: [models.\"{name}\"] prices must be numbers >= 0")
        out[name] = Price(float(values[0]), float(values[1]), None if values[2] is None else float(values[2]))
    return out


class PriceTable:
    def __init__(self, prices: dict[str, Price]) -> None:
        self.prices = dict(prices)
        self._lower = {k.lower(): v for k, v in prices.items()}

    @classmethod
    def load(cls, override: str | Path | None = None) -> PriceTable:
        """The shipped table, with the entries of `override` (a file of the same shape) on top."""
        prices = _read(SHIPPED)
        if override is not None:
            prices.update(_read(Path(override).expanduser()))
        return cls(prices)

    def lookup(self, model: str) -> Price | None:
        name = model.strip()
        for candidate in (name, name.rsplit("/", 1)[-1]):
            for key in (candidate, _DATE.sub("", candidate)):
                found = self.prices.get(key) or self._lower.get(key.lower())
                if found is not None:
                    return found
        return None
