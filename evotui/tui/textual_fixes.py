"""Workarounds for Textual 8.x defects (two hangs, a resize that is never seen), applied when
the TUI is imported.

A toast whose notification expires between the moment the toast rack builds it and the moment it
is mounted (screens re-mount the toasts of live notifications, e.g. after a screen switch) asks
for a timer with a negative delay. Textual's Timer._run then loops without ever awaiting
(its catch-up arithmetic never gets ahead of a negative interval) and the whole UI freezes at
100% CPU. Clamping the delay to a tiny positive value lets the toast simply expire at once.
"""

from __future__ import annotations

from typing import Callable

from textual.drivers._writer_thread import WriterThread
from textual.widgets._toast import Toast

MIN_TOAST_DELAY_S = 0.001


def _clamped_on_mount(self: Toast, event) -> None:
    self._timeout = max(self._timeout, MIN_TOAST_DELAY_S)
    _original_on_mount(self, event)


if getattr(Toast._on_mount, "__name__", "") != _clamped_on_mount.__name__:
    _original_on_mount = Toast._on_mount
    Toast._on_mount = _clamped_on_mount


# -- a lost terminal must not wedge the UI loop ---------------------------------------------
# Textual's WriterThread dies on its first failed write (EIO once the terminal has hung up); the
# UI loop then blocks for good in Queue.put as soon as the 30-slot queue fills, so the run's
# heartbeat stops and the process never exits. This run() keeps taking writes off the queue and
# drops them once the terminal has gone, and reports the loss once.

terminal_lost: Callable[[], None] | None = None
"""Called (from the writer thread) the first time a write to the terminal fails."""


def _tolerant_run(self: WriterThread) -> None:
    lost = False
    while True:
        text = self._queue.get()
        if text is None:
            break
        if lost:
            continue
        try:
            self._file.write(text)
            if self._queue.qsize() == 0:
                self._file.flush()
        except (OSError, ValueError):  # ValueError: the file was closed under us
            lost = True
            callback = terminal_lost
            if callback is not None:
                callback()
    if not lost:
        try:
            self._file.flush()
        except (OSError, ValueError):
            pass  # the terminal went at the very end; nothing is left to show on it


if WriterThread.run.__name__ != _tolerant_run.__name__:
    WriterThread.run = _tolerant_run


# -- a resize must reach the app even with COLUMNS/LINES in the environment ------------------
# LinuxDriver reads the size with shutil.get_terminal_size(), which believes COLUMNS and LINES
# when they are set (exported by some shells and profiles, by `script`, by test harnesses): every
# SIGWINCH then reports the size the process started with, and the app lays out for it while the
# terminal has another (panels overlap, the footer is off screen). The terminal's own size,
# asked of the tty, comes first; the environment only when there is no tty to ask.

from textual.drivers.linux_driver import LinuxDriver  # noqa: E402


def _tty_size(self: LinuxDriver) -> tuple[int, int]:
    import os

    for fd in (self._file.fileno() if hasattr(self._file, "fileno") else None, 0):
        if fd is None:
            continue
        try:
            size = os.get_terminal_size(fd)
        except (OSError, ValueError):
            continue
        if size.columns and size.lines:
            return size.columns, size.lines
    return _original_size(self)


if LinuxDriver._get_terminal_size.__name__ != _tty_size.__name__:
    _original_size = LinuxDriver._get_terminal_size
    LinuxDriver._get_terminal_size = _tty_size
