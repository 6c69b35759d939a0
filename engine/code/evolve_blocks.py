"""tree-sitter views of a Python program: EVOLVE-BLOCK regions, functions, a syntax pre-check.

Markers count only as comment nodes (a marker inside a string literal is not a marker).
tree-sitter reports byte offsets; they are converted to str indices here and nowhere else.
The syntax verdict is ``ast.parse``; tree-sitter's error nodes are a fast hint with positions.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass
from functools import lru_cache

import tree_sitter_python as tspython
from tree_sitter import Language, Node, Parser, Query, QueryCursor

START = "# EVOLVE-BLOCK-START"
END = "# EVOLVE-BLOCK-END"


class RegionError(ValueError):
    """EVOLVE-BLOCK markers that do not pair up; the message names the line."""


@lru_cache(maxsize=1)
def _language() -> Language:
    return Language(tspython.language())


@lru_cache(maxsize=1)
def _queries() -> tuple[Query, Query]:
    lang = _language()
    markers = Query(lang, '((comment) @m (#match? @m "^# *EVOLVE-BLOCK-(START|END)"))')
    funcs = Query(lang, "(function_definition name: (identifier) @name) @def")
    return markers, funcs


def parse(source: str):
    return Parser(_language()).parse(source.encode("utf-8"))


class Offsets:
    """Byte offset -> str index for one text (identity when the text is ASCII)."""

    def __init__(self, text: str) -> None:
        self.ascii = text.isascii()
        if not self.ascii:
            self._starts: list[int] = []
            pos = 0
            for ch in text:
                self._starts.append(pos)
                pos += len(ch.encode("utf-8"))
            self._starts.append(pos)

    def index(self, byte_offset: int) -> int:
        if self.ascii:
            return byte_offset
        return bisect.bisect_left(self._starts, byte_offset)


@dataclass(frozen=True)
class Region:
    """Editable text between a START and an END marker line (both excluded).

    ``start``/``end`` are str indices of the content; lines are 1-based, inclusive of the markers.
    """

    start: int
    end: int
    start_line: int
    end_line: int


def _line_start(text: str, idx: int) -> int:
    return text.rfind("\n", 0, idx) + 1


def _line_end(text: str, idx: int) -> int:
    nl = text.find("\n", idx)
    return len(text) if nl < 0 else nl + 1


def find_regions(source: str) -> list[Region]:
    """EVOLVE-BLOCK regions in source order; [] when the program has no markers.

    Raises RegionError for a START without END, an END without START, or nested STARTs.
    """
    markers, _ = _queries()
    tree = parse(source)
    off = Offsets(source)
    nodes = sorted(QueryCursor(markers).captures(tree.root_node).get("m", []), key=lambda n: n.start_byte)
    regions: list[Region] = []
    open_at: tuple[int, int] | None = None
    for node in nodes:
        text = node.text.decode("utf-8", "replace")
        line = node.start_point[0] + 1
        idx = off.index(node.start_byte)
        if "START" in text:
            if open_at is not None:
                raise RegionError(f"line {line}: EVOLVE-BLOCK-START inside the block opened at line {open_at[1]}")
            open_at = (_line_end(source, idx), line)
        else:
            if open_at is None:
                raise RegionError(f"line {line}: EVOLVE-BLOCK-END without a matching EVOLVE-BLOCK-START")
            regions.append(Region(open_at[0], _line_start(source, idx), open_at[1], line))
            open_at = None
    if open_at is not None:
        raise RegionError(f"line {open_at[1]}: EVOLVE-BLOCK-START without a matching EVOLVE-BLOCK-END")
    return regions


def editable_spans(source: str) -> list[tuple[int, int]]:
    """(start, end) str spans that may be edited: the regions, or the whole text without markers."""
    regions = find_regions(source)
    if not regions:
        return [(0, len(source))]
    return [(r.start, r.end) for r in regions]


def outside_text(source: str) -> list[str]:
    """The fixed parts around the regions (what an edit must leave unchanged)."""
    regions = find_regions(source)
    parts, pos = [], 0
    for r in regions:
        parts.append(source[pos:r.start])
        pos = r.end
    parts.append(source[pos:])
    return parts


def line_of(source: str, idx: int) -> int:
    return source.count("\n", 0, idx) + 1


@dataclass(frozen=True)
class Function:
    name: str
    start_line: int
    end_line: int
    is_async: bool
    decorated: bool
    start: int
    end: int
    """str span including decorators."""


def find_functions(source: str) -> list[Function]:
    """Every function definition (methods and nested ones too), decorators included in the span."""
    _, funcs = _queries()
    tree = parse(source)
    off = Offsets(source)
    out: list[Function] = []
    for _, caps in QueryCursor(funcs).matches(tree.root_node):
        fn: Node = caps["def"][0]
        span = fn.parent if fn.parent is not None and fn.parent.type == "decorated_definition" else fn
        out.append(Function(
            name=caps["name"][0].text.decode("utf-8"),
            start_line=span.start_point[0] + 1,
            end_line=span.end_point[0] + 1,
            is_async=bool(fn.children) and fn.children[0].type == "async",
            decorated=span is not fn,
            start=off.index(span.start_byte),
            end=off.index(span.end_byte),
        ))
    return sorted(out, key=lambda f: f.start)


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}: {self.message}"


def syntax_hints(source: str, limit: int = 5) -> list[SyntaxProblem]:
    """tree-sitter's ERROR and MISSING nodes with positions (fast, not authoritative)."""
    tree = parse(source)
    if not tree.root_node.has_error:
        return []
    found: list[SyntaxProblem] = []
    stack = [tree.root_node]
    while stack and len(found) < limit:
        node = stack.pop()
        if node.is_missing:
            found.append(SyntaxProblem(node.start_point[0] + 1, node.start_point[1] + 1, f"missing {node.type!r}"))
        elif node.is_error:
            found.append(SyntaxProblem(node.start_point[0] + 1, node.start_point[1] + 1, "unexpected code"))
        elif node.has_error:
            stack.extend(reversed(node.children))
    return sorted(found, key=lambda p: (p.line, p.column))


def check_syntax(source: str) -> SyntaxProblem | None:
    """None if the program compiles; otherwise the first problem (``ast.parse`` is the verdict)."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        hints = syntax_hints(source, limit=1)
        msg = exc.msg
        if hints and hints[0].line != (exc.lineno or 0):
            msg += f" (tree-sitter also flags {hints[0]})"
        return SyntaxProblem(exc.lineno or 0, exc.offset or 0, msg)
    except ValueError as exc:  # e.g. null bytes
        return SyntaxProblem(0, 0, str(exc))
    return None
