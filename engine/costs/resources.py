"""Where the top-level data folders (tasks/, themes/) are at run time.

In a source checkout or an editable install they sit next to the packages; a wheel cannot hold
top-level data folders, so setup.py copies them into `<package>/_bundled/` at build time.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


def data_dir(name: str, package: str) -> Path:
    """`<checkout>/<name>` when it exists, else `<site-packages>/<package>/_bundled/<name>`."""
    checkout = _ROOT / name
    if checkout.is_dir():
        return checkout
    return _ROOT / package / "_bundled" / name
