"""evotui. `evotui.optimize` (evotui/library/api.py) loads on first use, so `import evotui` stays cheap."""

from __future__ import annotations

from typing import Any

__all__ = ["optimize", "optimize_async", "OptimizeResult", "restore", "component_versions", "edit_component"]
_ADMIN = {"restore", "component_versions", "edit_component"}  # evotui/library/admin.py


def __getattr__(name: str) -> Any:
    if name in _ADMIN:
        from evotui.library import admin as admin_api

        return getattr(admin_api, name)
    if name in __all__:
        from evotui.library import api

        return getattr(api, name)
    raise AttributeError(f"module 'evotui' has no attribute {name!r}")
