"""Theme files: TOML in themes/, validated (pydantic, then Color.parse on every colour) and
registered as textual Themes. A bad file is skipped with a notice; an unknown theme name falls
back to evotui-dark (or Textual's own dark theme) with a notice. Nothing is fatal.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError
from textual.color import Color, ColorParseError
from textual.theme import Theme

from engine.costs.resources import data_dir

THEMES_DIR = data_dir("themes", "evotui")
FALLBACK = "evotui-dark"


class ThemeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    dark: bool = True
    primary: str
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    luminosity_spread: float = 0.15
    text_alpha: float = 0.95
    variables: dict[str, str] = {}


COLOUR_FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground",
                 "background", "surface", "panel", "boost")


def parse_theme(path: Path) -> Theme:
    """Raises ValueError with a one-line message naming the file and the bad entry."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        spec = ThemeFile.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"theme {path.name}: {exc}") from None
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"theme {path.name}: {bad}") from None
    for key in COLOUR_FIELDS:
        value = getattr(spec, key)
        if value is not None:
            _check_colour(path, key, value)
    for key, value in spec.variables.items():
        _check_colour(path, f"variables.{key}", value)
    kwargs = {k: getattr(spec, k) for k in COLOUR_FIELDS if getattr(spec, k) is not None}
    return Theme(name=spec.name, dark=spec.dark, luminosity_spread=spec.luminosity_spread,
                 text_alpha=spec.text_alpha, variables=dict(spec.variables), **kwargs)


def _check_colour(path: Path, key: str, value: str) -> None:
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ValueError(f"theme {path.name}: {key} = {value!r} is not a colour ({exc})") from None


def load_themes(directory: Path = THEMES_DIR) -> tuple[list[Theme], list[str]]:
    """All valid themes in the directory, and one notice per file that failed."""
    themes, problems = [], []
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            themes.append(parse_theme(path))
        except ValueError as exc:
            problems.append(str(exc))
    return themes, problems
