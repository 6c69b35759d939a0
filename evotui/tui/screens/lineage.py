"""The artifact tree: scores, status and review notes; diffs against the parent; copy via OSC 52."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Tree

from evotui.tui.backend import ArtifactView, Frame
from evotui.tui.keymap import DIFF_BINDINGS, LINEAGE_BINDINGS
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.diffview import DiffView, changed_note
from evotui.tui.widgets.panels import fmt

MARK = {"seed": "◆", "confirmed": "●", "rejected": "✗", "removed": "○", "speculative": "◇"}


def label(a: ArtifactView) -> str:
    note = f" · {a.note}" if a.note else ""
    score = "" if a.score is None else f" {fmt(a.score)}"
    version = f" v{a.version}" if a.version else ""
    return f"{MARK.get(a.status, '·')} {a.artifact_id}{version}{score} {a.status}{note}"


class LineageScreen(EvoScreen):
    BINDINGS = LINEAGE_BINDINGS
    HELP = """\
## Lineage
Every artifact under its parent: ◆ seed, ● confirmed, ✗ rejected (by the metric or a reviewer),
with score, pool version, provenance (merge of two parents, patched by reflection) and review
decision. **enter** diffs against the parent (per component, under each changed component's
name, for a prompt of named components), **y** copies
the id, **Y** the text (OSC 52; under tmux set `set-clipboard on`).
"""

    def __init__(self) -> None:
        super().__init__()
        self._tree_nodes: dict = {}
        self._labels: dict[str, str] = {}

    def body(self) -> ComposeResult:
        tree: Tree[ArtifactView] = Tree("artifacts", id="tree")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree

    def refresh_body(self, frame: Frame, app) -> None:
        tree = self.query_one(Tree)
        for a in sorted(app.backend.artifacts(), key=lambda x: (x.version or 10**9, x.artifact_id)):
            text = label(a)
            node = self._tree_nodes.get(a.artifact_id)
            if node is None:
                parent = self._tree_nodes.get(a.parent_id) if a.parent_id else None
                node = (parent or tree.root).add(text, data=a, expand=True, allow_expand=False)
                if parent is not None:
                    parent.allow_expand = True
                self._tree_nodes[a.artifact_id] = node
            elif self._labels.get(a.artifact_id) != text:
                node.set_label(text)
                node.data = a
            self._labels[a.artifact_id] = text

    def selected(self) -> ArtifactView | None:
        node = self.query_one(Tree).cursor_node
        return node.data if node is not None else None

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        event.stop()
        self.action_open_diff()

    def action_open_diff(self) -> None:
        a = self.selected()
        if a is None:
            self.notify("Select an artifact first", severity="warning")
            return
        parent = self._tree_nodes.get(a.parent_id) if a.parent_id else None
        old = parent.data.text if parent is not None and parent.data else ""
        if not a.text:
            self.notify(f"{a.artifact_id} has no stored text (rejected before commit)", severity="warning")
            return
        caption = f"{a.artifact_id} vs {a.parent_id or '(no parent)'}" + changed_note(old, a.text)
        self.app.push_screen(DiffScreen(old, a.text, caption))

    def action_copy_id(self) -> None:
        if (a := self.selected()) is not None:
            self.app.copy_to_clipboard(a.artifact_id)
            self.notify(f"Copied {a.artifact_id}")

    def action_copy_text(self) -> None:
        if (a := self.selected()) is not None:
            self.app.copy_to_clipboard(a.text)
            self.notify(f"Copied the text of {a.artifact_id} ({len(a.text)} chars)")


class DiffScreen(Screen):
    BINDINGS = DIFF_BINDINGS

    def __init__(self, old: str, new: str, caption: str) -> None:
        super().__init__()
        self.texts = (old, new, caption)

    def compose(self) -> ComposeResult:
        yield DiffView(id="full-diff")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(DiffView).set_texts(*self.texts)

    def action_diff_mode(self) -> None:
        self.query_one(DiffView).toggle_mode()

    def action_close(self) -> None:
        self.dismiss()
