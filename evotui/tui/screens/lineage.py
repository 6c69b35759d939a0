"""The artifact tree: scores, status and review notes; the best and its ancestors highlighted;
the selected artifact's strategy notes, selection tags and diff against its parent beside the
tree; a full-screen diff on enter; copy via OSC 52."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from engine.run.analysis import recycled_lines
from evotui.tui.backend import ArtifactView, Frame
from evotui.tui.keymap import DIFF_BINDINGS, LINEAGE_BINDINGS
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.diffview import DIFF_NAV_BINDINGS, DiffNavigation, DiffView, changed_note
from evotui.tui.widgets.evidence import artifact_text, is_program, notes_panel, strategy_notes
from evotui.tui.widgets.panels import fmt

MARK = {"seed": "◆", "confirmed": "●", "rejected": "✗", "removed": "○", "speculative": "◇"}


def label(a: ArtifactView, best_id: str | None = None, on_path: bool = False, new_best: bool = False) -> str:
    note = f" · {a.note}" if a.note else ""
    score = "" if a.score is None else f" {fmt(a.score)}"
    version = f" v{a.version}" if a.version else ""
    status = a.status
    if is_program(a) and a.status == "confirmed":
        status = "accepted, new best" if new_best else "accepted"  # into the population: see the side panel
    lead = "★ " if a.artifact_id == best_id else "↑ " if on_path else ""
    return f"{lead}{MARK.get(a.status, '·')} {a.artifact_id}{version}{score} {status}{note}"


def new_bests(arts: list[ArtifactView]) -> set[str]:
    """Artifacts that beat every earlier one when they were committed."""
    out: set[str] = set()
    best = None
    for a in sorted(arts, key=lambda x: x.version):
        if a.score is not None and a.status in ("seed", "confirmed") and (best is None or a.score > best):
            best = a.score
            out.add(a.artifact_id)
    return out


class LineageTree(Tree[ArtifactView]):
    """A Tree that styles the best artifact and its ancestors, and shows enter in the footer."""

    COMPONENT_CLASSES = {"lineage--best", "lineage--path"}
    BINDINGS = [Binding("enter", "screen.open_diff", "Diff", id="lineage.diff",
                        tooltip="Diff the artifact against its parent, full screen")]

    best_id: str | None = None
    path: frozenset[str] = frozenset()

    def render_label(self, node: TreeNode[ArtifactView], base_style: Style, style: Style) -> Text:
        text = super().render_label(node, base_style, style)
        a = node.data
        if a is not None and a.artifact_id in self.path:
            cls = "lineage--best" if a.artifact_id == self.best_id else "lineage--path"
            text.stylize(self.get_component_rich_style(cls, partial=True))
        return text


class LineageScreen(EvoScreen):
    BINDINGS = LINEAGE_BINDINGS
    HELP = """\
## Lineage
Every artifact under its parent: ◆ seed, ● confirmed, ✗ rejected (by the metric or a reviewer),
with score, pool version, provenance (merge of two parents, patched by reflection) and review
decision. ★ marks the best artifact and ↑ its ancestors; the selection starts on the best (**b**
returns to it). Beside the tree: the selected artifact's selection tags (e.g. its island), the
strategy's notes (plan, summary, guidance) and, for programs, why it is in the population
(every program that runs is kept; a new best beats all earlier ones), above its diff against
the parent; the strategy's notes in full (loongflow's plan and summary; contextevolve's
NEW / PRESERVES summary, guidance and exemplars) beside the diff (**o** hides or shows them).
**enter** opens the diff full screen (per component, under each changed
component's name, for a prompt of named components), **y** copies the id, **Y** the text
(OSC 52; under tmux set `set-clipboard on`).
"""

    def __init__(self) -> None:
        super().__init__()
        self._tree_nodes: dict[str, TreeNode[ArtifactView]] = {}
        self._labels: dict[str, str] = {}
        self._arts: list[ArtifactView] = []
        self._best_id: str | None = None
        self._placed = False
        """The cursor was put on the best once; after that it stays where the user moves it."""
        self._shown: tuple | None = None
        self.notes_hidden = False
        self._recycled_cache: dict[str, dict[str, str]] = {}
        """Recycled lines by artifact (texts never change once committed)."""
        """The user hid the notes panel (o) for a wider diff."""

    def body(self) -> ComposeResult:
        with Horizontal(id="lineage-split"):
            tree = LineageTree("artifacts", id="tree")
            tree.show_root = False
            tree.guide_depth = 2
            yield tree
            with Vertical(id="lineage-right"):
                yield Static("", id="artifact-info")
                with Horizontal(id="lineage-detail"):
                    yield DiffView(id="lineage-diff")
                    with VerticalScroll(id="lineage-notes-box") as box:
                        box.border_title = "plan & summary"
                        yield Static("", id="lineage-notes")

    def refresh_body(self, frame: Frame, app) -> None:
        tree = self.query_one(LineageTree)
        arts = sorted(app.backend.artifacts(), key=lambda x: (x.version or 10**9, x.artifact_id))
        by_id = {a.artifact_id: a for a in arts}
        best_id = frame.snap.best_id
        if best_id not in by_id:  # attach before the first snapshot names one
            scored = [a for a in arts if a.score is not None]
            best_id = max(scored, key=lambda a: a.score).artifact_id if scored else None
        path: set[str] = set()
        node_id = best_id
        while node_id is not None and node_id in by_id and node_id not in path:
            path.add(node_id)
            node_id = by_id[node_id].parent_id
        bests = new_bests(arts) if any(is_program(a) for a in arts) else set()
        self._arts, self._best_id = arts, best_id
        restyle = tree.best_id != best_id or tree.path != frozenset(path)
        tree.best_id, tree.path = best_id, frozenset(path)
        for a in arts:
            text = label(a, best_id, a.artifact_id in path, a.artifact_id in bests)
            node = self._tree_nodes.get(a.artifact_id)
            if node is None:
                parent = self._tree_nodes.get(a.parent_id) if a.parent_id else None
                node = (parent or tree.root).add(Text(text), data=a, expand=True, allow_expand=False)
                if parent is not None:
                    parent.allow_expand = True
                self._tree_nodes[a.artifact_id] = node
            elif self._labels.get(a.artifact_id) != text:
                node.set_label(Text(text))
                node.data = a
            self._labels[a.artifact_id] = text
        if restyle:
            tree.refresh()
        if not self._placed and best_id in self._tree_nodes:
            self._placed = True
            self.call_after_refresh(self._place_on_best)
        self.show_selected()

    def selected(self) -> ArtifactView | None:
        node = self.query_one(LineageTree).cursor_node
        return node.data if node is not None else None

    def _parent_text(self, a: ArtifactView) -> str:
        parent = self._tree_nodes.get(a.parent_id) if a.parent_id else None
        return parent.data.text if parent is not None and parent.data else ""

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        self.show_selected()

    def show_selected(self) -> None:
        a = self.selected()
        shown = (a, self._best_id, self.notes_hidden)
        if shown == self._shown:
            return
        self._shown = shown
        info = self.query_one("#artifact-info", Static)
        diff = self.query_one(DiffView)
        panel = a is not None and bool(strategy_notes(a.meta)) and not self.notes_hidden
        self.set_class(panel, "-notes")
        if a is None:
            info.update("")
            diff.set_texts("", "", "select an artifact")
            return
        recycled = self._recycled(a) if a.text else {}
        info.update(artifact_text(a, self._arts, self._best_id, with_notes=not panel, recycled=recycled))
        if panel:
            self.query_one("#lineage-notes", Static).update(notes_panel(a))
        old = self._parent_text(a)
        diff.set_texts(old, a.text, f"{a.artifact_id} vs {a.parent_id or '(no parent)'}" + changed_note(old, a.text),
                       frozenset(recycled))

    def _recycled(self, a: ArtifactView) -> dict[str, str]:
        """Lines `a` added that its lineage deleted before (EvoTrace's cycling), for programs."""
        if not is_program(a):
            return {}
        if a.artifact_id in self._recycled_cache:
            return self._recycled_cache[a.artifact_id]

        def node_data(aid: str) -> ArtifactView | None:
            node = self._tree_nodes.get(aid)
            return node.data if node is not None else None

        def text_of(aid: str) -> str | None:
            data = node_data(aid)
            return data.text if data is not None and data.text else None

        def parent_of(aid: str) -> str | None:
            data = node_data(aid)
            return data.parent_id if data is not None else None

        found = self._recycled_cache[a.artifact_id] = recycled_lines(text_of, parent_of, a.artifact_id)
        return found

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        event.stop()  # a mouse click: the keyboard's enter is the binding
        self.action_open_diff()

    def _place_on_best(self) -> None:
        """The first placement. Under load the tree may not have laid out its new nodes or sized its
        scroll range by the first refresh: lay the lines out now, and scroll again a frame later."""
        node = self._tree_nodes.get(self._best_id or "")
        tree = self.query_one(LineageTree)
        if node is None or tree.last_line < 0 or node.line < 0:
            self._placed = False  # the next sample tries again
            return
        tree.move_cursor(node)
        self.call_after_refresh(tree.scroll_to_node, node, animate=False)

    def action_goto_best(self) -> None:
        node = self._tree_nodes.get(self._best_id or "")
        if node is None:
            self.notify("No best artifact yet", severity="warning")
            return
        self.query_one(LineageTree).move_cursor(node)

    def action_diff_mode(self) -> None:
        self.query_one(DiffView).toggle_mode()

    def action_toggle_notes(self) -> None:
        self.notes_hidden = not self.notes_hidden
        self.show_selected()

    def action_open_diff(self) -> None:
        a = self.selected()
        if a is None:
            self.notify("Select an artifact first", severity="warning")
            return
        if not a.text:
            self.notify(f"{a.artifact_id} has no stored text (rejected before commit)", severity="warning")
            return
        old = self._parent_text(a)
        caption = f"{a.artifact_id} vs {a.parent_id or '(no parent)'}" + changed_note(old, a.text)
        recycled = self._recycled(a)
        info = artifact_text(a, self._arts, self._best_id, recycled=recycled)
        self.app.push_screen(DiffScreen(old, a.text, caption, info, frozenset(recycled)))

    def action_copy_id(self) -> None:
        if (a := self.selected()) is not None:
            self.app.copy_to_clipboard(a.artifact_id)
            self.notify(f"Copied {a.artifact_id}")

    def action_copy_text(self) -> None:
        if (a := self.selected()) is not None:
            self.app.copy_to_clipboard(a.text)
            self.notify(f"Copied the text of {a.artifact_id} ({len(a.text)} chars)")


class DiffScreen(DiffNavigation, Screen):
    BINDINGS = DIFF_BINDINGS + DIFF_NAV_BINDINGS

    def __init__(self, old: str, new: str, caption: str, info: object = "",
                 recycled: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.texts = (old, new, caption, recycled)
        self.info = info

    def compose(self) -> ComposeResult:
        info = Static(self.info, id="diff-info")  # type: ignore[arg-type]
        info.display = bool(self.info)
        yield info
        yield DiffView(id="full-diff")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(DiffView).set_texts(*self.texts)

    def action_diff_mode(self) -> None:
        self.query_one(DiffView).toggle_mode()

    def action_close(self) -> None:
        self.dismiss()
