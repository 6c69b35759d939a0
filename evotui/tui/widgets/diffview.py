"""A child against its parent: unified or side by side; line level with syntax highlighting for
code, word level for prompts. Every change carries a marker that does not rely on colour:
"+ "/"- " line prefixes, and {+added+} / [-removed-] around changed words. Texts of named
components (engine/components.py) are diffed per component, each under its name.
"""

from __future__ import annotations

import ast
import difflib
import re

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from engine.components import component_pairs

ADDED, REMOVED, SAME = "$text-success", "$text-error", "$text"
ADDED_BG, REMOVED_BG = "on $success 12%", "on $error 12%"
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


def looks_like_code(text: str) -> bool:
    if "\n" not in text or not re.search(r"^\s*(def|class|import|from|return)\b", text, re.M):
        return False
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _line(marker: str, text: Content | str, style: str, bg: str = "") -> Content:
    body = text if isinstance(text, Content) else Content(text)
    if bg:
        body = body.stylize(bg)
    return Content.assemble((marker, f"bold {style}"), body)


def _highlighted(text: str, code: bool) -> list[Content]:
    if not code:
        return [Content(line) for line in text.splitlines()]
    return list(highlight(text, language="python").split("\n", allow_blank=True))[: len(text.splitlines())]


def line_diff(old: str, new: str, code: bool) -> Content:
    """Unified, line level: '- ' removed, '+ ' added, '  ' unchanged."""
    a, b = old.splitlines(), new.splitlines()
    ha, hb = _highlighted(old, code), _highlighted(new, code)
    out: list[Content] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.extend(_line("  ", ha[i], SAME) for i in range(i1, i2))
            continue
        out.extend(_line("- ", ha[i], REMOVED, REMOVED_BG) for i in range(i1, i2))
        out.extend(_line("+ ", hb[j], ADDED, ADDED_BG) for j in range(j1, j2))
    return Content("\n").join(out) if out else Content("(both empty)")


def word_diff(old: str, new: str) -> Content:
    """Unified, word level: [-removed-] and {+added+} inline, as `git diff --word-diff=plain`."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    parts: list[tuple[str, str] | str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append("".join(a[i1:i2]))
            continue
        if i2 > i1:
            parts.append(("[-" + "".join(a[i1:i2]) + "-]", f"{REMOVED} strike {REMOVED_BG}"))
        if j2 > j1:
            parts.append(("{+" + "".join(b[j1:j2]) + "+}", f"{ADDED} bold {ADDED_BG}"))
    return Content.assemble(*parts) if parts else Content("(both empty)")


def split_diff(old: str, new: str, code: bool) -> tuple[Content, Content]:
    """Side by side, aligned: each side pads the other's extra lines with blanks."""
    a, b = old.splitlines(), new.splitlines()
    ha, hb = _highlighted(old, code), _highlighted(new, code)
    left: list[Content] = []
    right: list[Content] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            left.extend(_line("  ", ha[i], SAME) for i in range(i1, i2))
            right.extend(_line("  ", hb[j], SAME) for j in range(j1, j2))
            continue
        ls = [_line("- ", ha[i], REMOVED, REMOVED_BG) for i in range(i1, i2)]
        rs = [_line("+ ", hb[j], ADDED, ADDED_BG) for j in range(j1, j2)]
        n = max(len(ls), len(rs))
        left.extend(ls + [Content("")] * (n - len(ls)))
        right.extend(rs + [Content("")] * (n - len(rs)))
    return Content("\n").join(left), Content("\n").join(right)


def _section(name: str) -> Content:
    return Content.styled(f"── [{name}] ──", "bold $accent")


def component_diff(old: str, new: str, code: bool, split: bool) -> tuple[Content, Content] | None:
    """Two renderings of named components (engine/components.py): each changed component's diff
    under a `── [name] ──` heading, the unchanged ones named on one line; None if the texts are
    not both renderings. Unified: the body and an empty right side; split: left and right."""
    pairs = component_pairs(old, new)
    if pairs is None:
        return None
    changed, same = pairs
    left: list[Content] = []
    right: list[Content] = []
    for name, a, b in changed:
        left.append(_section(name))
        if split:
            sides = split_diff(a, b, code)
            right.append(_section(name))
            left.append(sides[0])
            right.append(sides[1])
        else:
            left.append(line_diff(a, b, True) if code else word_diff(a, b))
    if same:
        note = Content.styled(f"unchanged: {', '.join(f'[{n}]' for n in same)}", "italic $text-muted")
        left.append(note)
        if split:
            right.append(note)
    if not changed:
        left.insert(0, Content("(no component changed)"))
    return Content("\n").join(left), Content("\n").join(right)


def changed_note(old: str, new: str) -> str:
    """" · changed [a], [b]" for two renderings of named components, else ""."""
    pairs = component_pairs(old, new)
    if pairs is None or not pairs[0]:
        return ""
    return " · changed " + ", ".join(f"[{name}]" for name, _, _ in pairs[0])


def diff_stats(old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return f"+{added} -{removed} lines"


class DiffView(Widget):
    """Shows one pair of texts. `mode` is "unified" or "split"."""

    mode: reactive[str] = reactive("unified")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.old = ""
        self.new = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="diff-caption", classes="caption")
        with VerticalScroll(id="diff-unified"):
            yield Static("", id="diff-body")
        with Horizontal(id="diff-split"):
            with VerticalScroll():
                yield Static("", id="diff-left")
            with VerticalScroll():
                yield Static("", id="diff-right")

    def set_texts(self, old: str, new: str, caption: str = "") -> None:
        self.old, self.new, self.caption = old, new, caption
        self._render_diff()

    def watch_mode(self) -> None:
        self._render_diff()

    def toggle_mode(self) -> None:
        self.mode = "split" if self.mode == "unified" else "unified"

    def _render_diff(self) -> None:
        if not self.is_mounted:
            return
        code = looks_like_code(self.new) or looks_like_code(self.old)
        kind = "code, line level" if code else "prompt, word level"
        split = self.mode == "split"
        per_component = component_diff(self.old, self.new, code, split)
        if per_component is not None:
            kind += ", per component"
        caption = getattr(self, "caption", "")
        self.query_one("#diff-caption", Static).update(
            Content(f"{caption}  {diff_stats(self.old, self.new)} · {kind} · {'side by side' if split else 'unified'}"))
        self.query_one("#diff-unified").display = not split
        self.query_one("#diff-split").display = split
        if per_component is not None:
            left, right = per_component
            if split:
                self.query_one("#diff-left", Static).update(left)
                self.query_one("#diff-right", Static).update(right)
            else:
                self.query_one("#diff-body", Static).update(left)
        elif split:
            left, right = split_diff(self.old, self.new, code)
            self.query_one("#diff-left", Static).update(left)
            self.query_one("#diff-right", Static).update(right)
        else:
            body = line_diff(self.old, self.new, True) if code else word_diff(self.old, self.new)
            self.query_one("#diff-body", Static).update(body)

    def on_mount(self) -> None:
        self._render_diff()
