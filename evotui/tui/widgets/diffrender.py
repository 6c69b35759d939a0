"""Diff rendering for reading: numbered lines, unchanged runs folded to a few lines of context,
and the row of every change so a view can jump between them.

Both layouts are lists of DiffLine rows: unified keeps one column (`left`), side by side keeps
two aligned columns. Prompts get word-level changes inside each changed block, code line-level
changes with syntax highlighting. Nothing here touches a widget.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from textual.content import Content
from textual.highlight import highlight

from engine.components import component_pairs

ADDED, REMOVED, SAME, RECYCLED = "$text-success", "$text-error", "$text", "$text-warning"
ADDED_BG, REMOVED_BG = "on $success 12%", "on $error 12%"
GUTTER = "$text-muted"
_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class DiffLine:
    left: Content
    right: Content = Content("")
    kind: str = "same"
    """"same" (foldable), "change", or "head" (a component heading: never folded)."""


@dataclass(frozen=True)
class Rendered:
    left: Content
    right: Content
    changes: tuple[int, ...]
    """Row of the first line of every change block, top to bottom."""
    hidden: int
    """Unchanged lines folded away."""


def looks_like_code(text: str) -> bool:
    if "\n" not in text or not re.search(r"^\s*(def|class|import|from|return)\b", text, re.M):
        return False
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _highlighted(text: str, code: bool) -> list[Content]:
    if not code:
        return [Content(line) for line in text.splitlines()]
    return list(highlight(text, language="python").split("\n", allow_blank=True))[: len(text.splitlines())]


def _num(n: int | None, width: int) -> str:
    return (str(n) if n is not None else "").rjust(width) + " "


def _row(nums: str, marker: str, body: Content, style: str, bg: str = "") -> Content:
    if bg:
        body = body.stylize(bg)
    return Content.assemble((nums, GUTTER), (marker, f"bold {style}"), body)


def _word_lines(old: str, new: str) -> list[Content]:
    """One block as `git diff --word-diff=plain`: [-removed-] and {+added+} inline, split into lines."""
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
    return Content.assemble(*parts).split("\n", allow_blank=True)


def diff_lines(old: str, new: str, code: bool, split: bool, recycled: frozenset[str] = frozenset()) -> list[DiffLine]:
    """Every line of both texts, aligned: unified ('- ', '+ ', '~ ' for a prompt's word-level
    block where lines were both removed and added) or side by side (each side padded with blanks where the other has more lines). An
    added line in `recycled` (stripped: one the lineage deleted before) is marked '↺ '."""
    a, b = old.splitlines(), new.splitlines()

    def added(j: int, nums: str) -> Content:
        if b[j].strip() in recycled:
            return _row(nums, "↺ ", hb[j], RECYCLED, ADDED_BG)
        return _row(nums, "+ ", hb[j], ADDED, ADDED_BG)

    ha, hb = _highlighted(old, code), _highlighted(new, code)
    w = len(str(max(len(a), len(b), 1)))
    out: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if split:
                    out.append(DiffLine(_row(_num(i + 1, w), "  ", ha[i], SAME), _row(_num(j + 1, w), "  ", hb[j], SAME)))
                else:
                    out.append(DiffLine(_row(_num(i + 1, w) + _num(j + 1, w), "  ", hb[j], SAME)))
            continue
        if split:
            ls = [_row(_num(i + 1, w), "- ", ha[i], REMOVED, REMOVED_BG) for i in range(i1, i2)]
            rs = [added(j, _num(j + 1, w)) for j in range(j1, j2)]
            blank = Content(" " * (w + 1))
            for k in range(max(len(ls), len(rs))):
                out.append(DiffLine(ls[k] if k < len(ls) else blank, rs[k] if k < len(rs) else blank, "change"))
        elif code:
            out.extend(DiffLine(_row(_num(i + 1, w) + _num(None, w), "- ", ha[i], REMOVED, REMOVED_BG), kind="change")
                       for i in range(i1, i2))
            out.extend(DiffLine(added(j, _num(None, w) + _num(j + 1, w)), kind="change") for j in range(j1, j2))
        else:
            if i1 == i2:  # a pure addition: plain '+' lines, nothing to compare word by word
                out.extend(DiffLine(added(j, _num(None, w) + _num(j + 1, w)), kind="change") for j in range(j1, j2))
                continue
            if j1 == j2:
                out.extend(DiffLine(_row(_num(i + 1, w) + _num(None, w), "- ", ha[i], REMOVED, REMOVED_BG),
                                    kind="change") for i in range(i1, i2))
                continue
            words = _word_lines("\n".join(a[i1:i2]), "\n".join(b[j1:j2]))
            for k, line in enumerate(words):
                nums = _num(i1 + k + 1 if i1 + k < i2 else None, w) + _num(j1 + k + 1 if j1 + k < j2 else None, w)
                out.append(DiffLine(_row(nums, "~ ", line, SAME), kind="change"))
    return out


def _heading(name: str) -> DiffLine:
    head = Content.styled(f"── [{name}] ──", "bold $accent")
    return DiffLine(head, head, "head")


def component_lines(old: str, new: str, code: bool, split: bool,
                    recycled: frozenset[str] = frozenset()) -> list[DiffLine] | None:
    """Two renderings of named components (engine/components/__init__.py): each changed component's
    lines under a `── [name] ──` heading, the unchanged ones named on one line; None if the
    texts are not both renderings."""
    pairs = component_pairs(old, new)
    if pairs is None:
        return None
    changed, same = pairs
    out: list[DiffLine] = [] if changed else [DiffLine(Content("(no component changed)"), kind="head")]
    for name, a, b in changed:
        out.append(_heading(name))
        out.extend(diff_lines(a, b, code, split, recycled))
    if same:
        note = Content.styled(f"unchanged: {', '.join(f'[{n}]' for n in same)}", "italic $text-muted")
        out.append(DiffLine(note, note if split else Content(""), "head"))
    return out


def fold(lines: list[DiffLine], context: int | None) -> tuple[list[DiffLine], int]:
    """Runs of unchanged lines cut to `context` lines beside each change (None: keep all);
    returns the lines and how many were hidden."""
    if context is None:
        return lines, 0
    out: list[DiffLine] = []
    hidden = i = 0
    while i < len(lines):
        if lines[i].kind != "same":
            out.append(lines[i])
            i += 1
            continue
        end = i
        while end < len(lines) and lines[end].kind == "same":
            end += 1
        before = i > 0 and lines[i - 1].kind == "change"
        after = end < len(lines) and lines[end].kind == "change"
        head = lines[i:min(i + context, end)] if before else []
        tail = lines[max(i + len(head), end - context):end] if after else []
        gone = end - i - len(head) - len(tail)
        out.extend(head)
        if gone > 1:
            marker = Content.styled(f"  ⋯ {gone} unchanged lines (f: full file)", "italic $text-muted")
            out.append(DiffLine(marker, marker, "fold"))
            hidden += gone
        else:
            out.extend(lines[i + len(head):end - len(tail)])
        out.extend(tail)
        i = end
    return out, hidden


def render(old: str, new: str, code: bool, split: bool, context: int | None,
           recycled: frozenset[str] = frozenset()) -> Rendered:
    lines = component_lines(old, new, code, split, recycled)
    if lines is None:
        lines = diff_lines(old, new, code, split, recycled)
    if not lines:
        lines = [DiffLine(Content("(both empty)"), kind="head")]
    lines, hidden = fold(lines, context)
    changes = tuple(k for k, line in enumerate(lines)
                    if line.kind == "change" and (k == 0 or lines[k - 1].kind != "change"))
    return Rendered(Content("\n").join(ln.left for ln in lines), Content("\n").join(ln.right for ln in lines),
                    changes, hidden)


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
