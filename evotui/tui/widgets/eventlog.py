"""The event log: follows new lines unless the user scrolled up, and then says so."""

from __future__ import annotations

from textual.widgets import Log


class FollowLog(Log):
    """A Log that keeps to its end while following. Scrolling up stops following: the view stays
    put and the subtitle counts the lines written below; scrolling back to the end (or End on
    the dashboard) follows again. Following is a state changed only by scrolling, not a test of
    the scroll position at each write (a write lands before the previous one's scroll); a resize
    keeps a following log at its end."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, auto_scroll=False, **kwargs)
        self.unseen = 0
        self.following = True

    def add(self, lines: list[str]) -> None:
        if not lines:
            return
        # Log.write_lines scrolls only from the very end; after a resize that made the log
        # shorter the offset is above it, so the follow is explicit.
        self.write_lines(lines, scroll_end=False)
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.unseen += len(lines)
            self.border_subtitle = f"scrolled up · {self.unseen} new below · End follows"

    def follow(self) -> None:
        self.following = True
        self.scroll_end(animate=False)
        self._caught_up()

    def on_resize(self) -> None:
        if self.following:  # a shorter log keeps its offset, now above the end
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new >= self.max_scroll_y:  # at the end, also when a taller view clamped the offset
            if not self.following:
                self.following = True
                self._caught_up()
        elif new < old:  # up and away from the end: only the user does that; writes scroll down
            self.following = False

    def _caught_up(self) -> None:
        self.unseen = 0
        self.border_subtitle = ""
