"""UI settings: a TOML file of its own (`--ui-config FILE`, or $EVOTUI_UI_CONFIG), kept apart
from the run config because the run config refuses unknown keys and describes the run, not the
viewer. Unknown keys are refused here too.

    theme = "evotui-dark"     # a file in themes/ or a Textual built-in theme
    refresh_hz = 4            # dashboard samples per second (1-10)
    mouse = true
    log_lines = 500
    [keymap]                  # binding id -> keys, e.g. pause = "p", "review.approve" = "y"
    pause = "p"
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class UISettingsError(Exception):
    pass


class UISettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    theme: str = "evotui-dark"
    """Theme name: a file in themes/ (by its `name`) or a Textual built-in theme."""
    refresh_hz: float = Field(default=4.0, ge=1.0, le=10.0)
    """How often the dashboard samples the engine snapshot."""
    mouse: bool = True
    """Mouse reporting; off sends less over SSH and keeps native terminal selection."""
    log_lines: int = Field(default=500, ge=50, le=100_000)
    """Event log line cap."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Binding id -> comma-separated keys; ids are listed in the F1 help and the README."""


def load_ui_settings(path: Path | None) -> UISettings:
    if path is None:
        env = os.environ.get("EVOTUI_UI_CONFIG")
        if not env:
            return UISettings()
        path = Path(env)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UISettingsError(f"UI config {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UISettingsError(f"UI config {path}: {exc}") from None
    try:
        return UISettings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise UISettingsError(f"UI config {path}: {problems}") from None


def check_keymap(keymap: dict[str, str], known_ids: list[str]) -> None:
    unknown = sorted(set(keymap) - set(known_ids))
    if unknown:
        raise UISettingsError(f"unknown keymap binding id(s) {', '.join(unknown)}; known ids: {', '.join(sorted(known_ids))}")
    empty = sorted(k for k, v in keymap.items() if not v.strip())
    if empty:
        raise UISettingsError(f"keymap entries with no keys: {', '.join(empty)}")
    from evotui.tui.keymap import keymap_clashes  # textual is loaded only by the UI path

    clashes = keymap_clashes(keymap)
    if clashes:
        raise UISettingsError("keymap clash: " + "; ".join(clashes))
