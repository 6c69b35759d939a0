"""A workaround for a Textual 8.x hang, applied when the TUI is imported.

A toast whose notification expires between the moment the toast rack builds it and the moment it
is mounted (screens re-mount the toasts of live notifications, e.g. after a screen switch) asks
for a timer with a negative delay. Textual's Timer._run then loops without ever awaiting
(its catch-up arithmetic never gets ahead of a negative interval) and the whole UI freezes at
100% CPU. Clamping the delay to a tiny positive value lets the toast simply expire at once.
"""

from __future__ import annotations

from textual.widgets._toast import Toast

MIN_TOAST_DELAY_S = 0.001


def _clamped_on_mount(self: Toast, event) -> None:
    self._timeout = max(self._timeout, MIN_TOAST_DELAY_S)
    _original_on_mount(self, event)


if getattr(Toast._on_mount, "__name__", "") != _clamped_on_mount.__name__:
    _original_on_mount = Toast._on_mount
    Toast._on_mount = _clamped_on_mount
