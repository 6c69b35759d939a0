"""evotui. `evotui.optimize` (evotui/api.py) loads on first use, so `import evotui` stays cheap."""

from __future__ import annotations

from typing import Any

__all__ = ["optimize", "optimize_async", "OptimizeResult"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from evotui import api

        return getattr(api, name)
    raise AttributeError(f"module 'evotui' has no attribute {name!r}")
