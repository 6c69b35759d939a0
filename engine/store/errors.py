"""The one exception type the store raises; messages are one line naming the problem and the fix."""

from __future__ import annotations


class StoreError(Exception):
    """A database problem the user or the engine must act on (bad path, newer schema, failed write)."""
