"""Patch review: proposals held before evaluation (gate "evaluate") or before commit ("update").

The pipeline keeps running while items wait. Decisions go through the backend, which persists
them (reviews table) and shows them in the lineage. Editing hands the terminal to $EDITOR via
App.suspend; every failure (no editor, non-zero exit, empty text) leaves the item waiting.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
import time
from pathlib import Path

from textual.app import ComposeResult, SuspendNotSupported
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from evotui.tui.backend import Frame
from evotui.tui.keymap import REVIEW_BINDINGS
from evotui.tui.screens.base import EvoScreen, ReasonScreen
from evotui.tui.widgets.diffview import DIFF_NAV_BINDINGS, DiffNavigation, DiffView, changed_note, looks_like_code
from evotui.tui.widgets.evidence import evidence_text


def clock() -> float:
    """Wall time for the age column (tests replace it)."""
    return time.time()


def age(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s}s" if s < 120 else f"{s // 60}m{s % 60:02d}s" if s < 7200 else f"{s // 3600}h{s // 60 % 60:02d}m"


class ReviewScreen(DiffNavigation, EvoScreen):
    BINDINGS = REVIEW_BINDINGS + DIFF_NAV_BINDINGS
    HELP = """\
## Review queue
Turn gates on with **R** (before evaluation) and **C** (before commit). **a** approve,
**r** reject (optional reason), **e** edit in `$EDITOR` then approve, **s** skip, **A** approve
all, **m** unified / side-by-side diff, **n** / **N** next / previous change, **f** folded
changes / full file. Above the diff: the child's minibatch score against its parent's, its
score against the parent and the pool's best, the staleness policy's decisions and the
strategy's guidance notes. A prompt of named components is diffed per component, each changed
one under its `[name]`; editing works on the whole text (keep the `## [name]` lines).
"""

    DECISIONS = frozenset({"approve", "reject", "edit", "skip", "approve_all"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Decisions need a run that takes them: a read-only view does not offer them."""
        if action in self.DECISIONS and not self.app.can_control:
            return False  # hidden
        return True

    def __init__(self) -> None:
        super().__init__()
        self._ids: list[str] = []
        self._stay_at: int | None = None
        """Row to keep after a decision that moved the selected item away (skip)."""
        self._shown: tuple | None = None

    def body(self) -> ComposeResult:
        with Horizontal(id="review-split"):
            table = DataTable(id="pending", cursor_type="row", zebra_stripes=True)
            table.border_title = "Waiting"
            yield table
            with Vertical(id="review-right"):
                yield Static("", id="evidence")
                yield DiffView(id="review-diff")

    def on_mount(self) -> None:
        super().on_mount()
        self._cols = self.query_one(DataTable).add_columns("item", "gate", "parent", "age")
        # Ages move even when the sampler has nothing new to apply (a paused run, an attach).
        self.set_interval(1.0, self.sync_pending, name="review-ages")

    def refresh_body(self, frame: Frame, app) -> None:
        self.sync_pending()

    def sync_pending(self) -> None:
        """Rebuild the table when the queue changed (the cursor stays on its item, or on the row
        it left), else only update the ages."""
        if not self.ready or not self.is_current:
            return  # another mode's screen, or a modal over this one: caught up when shown
        pending = self.app.backend.pending()
        ids = [p.item_id for p in pending]
        table = self.query_one(DataTable)
        now = clock()
        if ids != self._ids:
            row = table.cursor_row if self._ids else 0
            keep = None if self._stay_at is not None else self.selected_id()
            if self._stay_at is not None:
                row, self._stay_at = self._stay_at, None
            table.clear()
            for p in pending:
                table.add_row(p.item_id, p.gate, p.parent_id, age(now - p.parked_at), key=p.item_id)
            self._ids = ids
            # The same item if it is still waiting, else whatever took its row (the next one).
            row = ids.index(keep) if keep in ids else min(row or 0, len(ids) - 1)
            table.move_cursor(row=max(row, 0))
        else:
            for p, shown in zip(pending, self._ages(table)):
                if (text := age(now - p.parked_at)) != shown:
                    table.update_cell(p.item_id, self._cols[3], text)
        table.border_title = f"Waiting ({len(ids)})"
        self.show_selected()

    def _ages(self, table: DataTable) -> list[str]:
        return [str(table.get_cell(i, self._cols[3])) for i in self._ids]

    def selected_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not self._ids or table.cursor_row is None or table.cursor_row >= len(self._ids):
            return None
        return self._ids[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_selected()

    def show_selected(self) -> None:
        item = self.selected_id()
        diff = self.query_one(DiffView)
        evidence = self.query_one("#evidence", Static)
        found = next((p for p in self.app.backend.pending() if p.item_id == item), None)
        if found is None:
            if self._shown != ():
                self._shown = ()
                diff.set_texts("", "", "nothing waiting" if not self._ids else "")
                evidence.update("")
            return
        frame = self.app.sampler.frame
        best = (frame.snap.best_id, frame.snap.best_score) if frame is not None else (None, None)
        ev = self.app.backend.evidence(found.item_id)
        shown = (found.item_id, found.child_text, found.parent_text, best, ev)
        if shown == self._shown:
            return  # unchanged: keep the diff's scroll position and change index
        self._shown = shown
        evidence.update(evidence_text(found, ev, *best))
        diff.set_texts(found.parent_text, found.child_text, f"{found.item_id} vs parent {found.parent_id} @{found.gate}"
                       + changed_note(found.parent_text, found.child_text))

    def _need(self) -> str | None:
        item = self.selected_id()
        if item is None:
            self.notify("Nothing is waiting for review", severity="warning")
        return item

    async def action_approve(self) -> None:
        if item := self._need():
            await self.app.decide(item, "approve")
            self.sync_pending()

    def action_reject(self) -> None:
        item = self._need()
        if item is None:
            return

        async def done(reason: str | None) -> None:
            if reason is not None:
                await self.app.decide(item, "reject", reason=reason)
                self.sync_pending()

        self.app.push_screen(ReasonScreen(f"Reject {item}?"), done)

    async def action_skip(self) -> None:
        if item := self._need():
            self._stay_at = self.query_one(DataTable).cursor_row  # it went to the back: select the next one
            await self.app.decide(item, "skip")
            self.sync_pending()

    async def action_approve_all(self) -> None:
        await self.app.control("approve_all", done="approved everything waiting")
        self.sync_pending()

    def action_diff_mode(self) -> None:
        self.query_one(DiffView).toggle_mode()

    async def action_edit(self) -> None:
        item = self._need()
        if item is None:
            return
        found = next((p for p in self.app.backend.pending() if p.item_id == item), None)
        if found is None:
            return
        text = await self.edit_text(found.child_text, ".py" if looks_like_code(found.child_text) else ".txt")
        if text is None:
            return
        if not text.strip():
            self.notify("The edited text is empty; the proposal is unchanged and still waiting", severity="error")
            return
        if text.strip() == found.child_text.strip():
            self.notify("No changes; press a to approve as is")
            return
        await self.app.decide(item, "edit", edited_text=text)
        self.sync_pending()

    async def edit_text(self, text: str, suffix: str) -> str | None:
        """Run $VISUAL/$EDITOR on a temp copy; None (with a notice) if that is impossible or fails."""
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.notify("$EDITOR is not set (export EDITOR=vim, nano, ...); nothing changed", severity="error")
            return None
        fd, name = tempfile.mkstemp(prefix="evotui-review-", suffix=suffix)
        path = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            rc = await self._run_editor([*shlex.split(editor), str(path)])
            if rc is None:
                return None
            if rc != 0:
                self.notify(f"{editor} exited with status {rc}; the proposal is unchanged and still waiting",
                            severity="error")
                return None
            return path.read_text(encoding="utf-8")
        finally:
            path.unlink(missing_ok=True)

    async def _run_editor(self, argv: list[str]) -> int | None:
        self.app.sampler.pause()
        try:
            try:
                with self.app.suspend():
                    return await self._spawn(argv)
            except SuspendNotSupported:
                return await self._spawn(argv)  # headless (tests): the editor must not need the terminal
        finally:
            self.app.sampler.resume()
            self.app.refresh()

    async def _spawn(self, argv: list[str]) -> int | None:
        try:
            proc = await asyncio.create_subprocess_exec(*argv)
        except OSError as exc:
            self.notify(f"cannot start editor {argv[0]!r}: {exc}; nothing changed", severity="error")
            return None
        return await proc.wait()
