"""The event log: follows new lines unless the user scrolled up, and then says so."""

from __future__ import annotations

from textual.widgets import Log


class FollowLog(Log):
    """A Log that keeps to its end while the view is at the end. Scrolled up, it stays put and
    its subtitle counts the lines written below; scrolling back to the end (or End on the
    dashboard) follows again."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, auto_scroll=False, **kwargs)
        self.unseen = 0

    @property
    def following(self) -> bool:
        return self.scroll_y >= self.max_scroll_y

    def add(self, lines: list[str]) -> None:
        if not lines:
            return
        follow = self.following
        self.write_lines(lines, scroll_end=follow)
        if not follow:
            self.unseen += len(lines)
            self.border_subtitle = f"scrolled up · {self.unseen} new below · End follows"

    def follow(self) -> None:
        self.scroll_end(animate=False)
        self._caught_up()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self.unseen and new >= self.max_scroll_y:
            self._caught_up()

    def _caught_up(self) -> None:
        self.unseen = 0
        self.border_subtitle = ""
