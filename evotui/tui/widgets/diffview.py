"""A child against its parent: unified or side by side; line level with syntax highlighting for
code, word level for prompts. Every change carries a marker that does not rely on colour:
"+ "/"- "/"~ " line prefixes ("↺ " for an added line its lineage deleted before), and {+added+} / [-removed-] around changed words. Lines are
numbered (old, new), unchanged runs fold to CONTEXT lines (f shows the full file), n / N jump
between changes. Texts of named components (engine/components/__init__.py) are diffed per component.
Lines never wrap: unified scrolls sideways, side by side truncates each column with an ellipsis.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from engine.components import component_pairs
from evotui.tui.keymap import DIFF_NAV_BINDINGS
from evotui.tui.widgets.diffrender import changed_note, diff_stats, looks_like_code, render

__all__ = ["DIFF_NAV_BINDINGS", "DiffNavigation", "DiffView", "changed_note", "looks_like_code"]

CONTEXT = 3
"""Unchanged lines kept on each side of a change when folded."""



class DiffView(Widget):
    """Shows one pair of texts. `mode` is "unified" or "split"; `folded` hides unchanged runs."""

    mode: reactive[str] = reactive("unified")
    folded: reactive[bool] = reactive(True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.old = ""
        self.new = ""
        self.caption = ""
        self.changes: tuple[int, ...] = ()
        self.change_index = -1
        """The change last jumped to (-1: none yet)."""
        self.hidden = 0
        self.recycled: frozenset[str] = frozenset()
        """Added lines (stripped) the child's lineage deleted before: marked ↺ in code diffs."""

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-caption", classes="caption")
        with VerticalScroll(id="diff-unified"):
            yield Static("", id="diff-body")
        with VerticalScroll(id="diff-split"):
            with Horizontal(id="diff-columns"):
                yield Static("", id="diff-left")
                yield Static("", id="diff-right")

    def set_texts(self, old: str, new: str, caption: str = "", recycled: frozenset[str] = frozenset()) -> None:
        same = (old, new) == (self.old, self.new)
        self.old, self.new, self.caption, self.recycled = old, new, caption, recycled
        if not same:
            self.change_index = -1
        self._render_diff(keep_scroll=same)

    def watch_mode(self) -> None:
        self._render_diff()

    def watch_folded(self) -> None:
        self.change_index = -1
        self._render_diff()

    def toggle_mode(self) -> None:
        self.mode = "split" if self.mode == "unified" else "unified"

    def toggle_fold(self) -> None:
        self.folded = not self.folded

    @property
    def scroller(self) -> VerticalScroll:
        return self.query_one("#diff-split" if self.mode == "split" else "#diff-unified", VerticalScroll)

    def jump(self, step: int) -> bool:
        """Scroll to the next (step 1) or previous (-1) change; False when there is none."""
        if not self.changes:
            return False
        index = max(0, min(len(self.changes) - 1, self.change_index + step))
        if index == self.change_index:
            return False
        self.change_index = index
        # One line of lead so the change is read in context.
        self.scroller.scroll_to(y=max(0, self.changes[index] - 1), animate=False, immediate=True)
        self._update_caption()
        return True

    def _update_caption(self) -> None:
        code = looks_like_code(self.new) or looks_like_code(self.old)
        kind = "code" if code else "prompt, word level"
        if component_pairs(self.old, self.new) is not None:
            kind += ", per component"
        where = f"change {self.change_index + 1}/{len(self.changes)}" if self.change_index >= 0 \
            else f"{len(self.changes)} change{'s' if len(self.changes) != 1 else ''}"
        view = "side by side" if self.mode == "split" else "unified"
        fold = f"folded (-{self.hidden})" if self.folded and self.hidden else ("folded" if self.folded else "full")
        self.query_one("#diff-caption", Static).update(
            Content(f"{self.caption}  {diff_stats(self.old, self.new)} · {where} · {kind} · {view} · {fold}"))

    def _render_diff(self, keep_scroll: bool = False) -> None:
        if not self.is_mounted:
            return
        code = looks_like_code(self.new) or looks_like_code(self.old)
        split = self.mode == "split"
        out = render(self.old, self.new, code, split, CONTEXT if self.folded else None, self.recycled)
        self.changes, self.hidden = out.changes, out.hidden
        self.query_one("#diff-unified").display = not split
        self.query_one("#diff-split").display = split
        if split:
            self.query_one("#diff-left", Static).update(out.left)
            self.query_one("#diff-right", Static).update(out.right)
        else:
            self.query_one("#diff-body", Static).update(out.left)
        if not keep_scroll:
            self.scroller.scroll_home(animate=False, immediate=True)
        self._update_caption()

    def on_mount(self) -> None:
        self._render_diff()


class DiffNavigation:
    """Screen actions for DIFF_NAV_BINDINGS, acting on the screen's DiffView."""

    def _diff(self) -> DiffView:
        return self.query_one(DiffView)  # type: ignore[attr-defined]

    def action_next_change(self) -> None:
        if not self._diff().jump(1):
            self.notify("No later change", timeout=2)  # type: ignore[attr-defined]

    def action_previous_change(self) -> None:
        if not self._diff().jump(-1):
            self.notify("No earlier change", timeout=2)  # type: ignore[attr-defined]

    def action_toggle_fold(self) -> None:
        self._diff().toggle_fold()
