"""tree-sitter views of a candidate program: EVOLVE-BLOCK regions, functions, a syntax pre-check.

Every function takes the candidate's language (engine/code/languages.py; default Python, so
pre-language callers keep working). Markers are the same words after that language's comment
prefix (``# EVOLVE-BLOCK-START``, ``// EVOLVE-BLOCK-START``, ``! EVOLVE-BLOCK-START``). Where a
grammar exists, only comment nodes count (a marker inside a string literal is not a marker);
without one (R) a marker is a line that starts with the comment prefix and the words.
tree-sitter reports byte offsets; they are converted to str indices here and nowhere else.
The syntax verdict is ``ast.parse`` for Python; for other languages with a grammar it is
tree-sitter's error nodes; without a grammar there is no pre-check and the evaluator decides.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Node, Parser, Query, QueryCursor, Tree

from engine.code.languages import PYTHON, LanguageSpec, grammar, resolve

START = "# EVOLVE-BLOCK-START"
END = "# EVOLVE-BLOCK-END"
"""Python's markers (see LanguageSpec.marker for the others)."""
_WORDS = re.compile(r"EVOLVE-BLOCK-(START|END)\b")
_COMMENT_KINDS = ("comment", "line_comment", "block_comment")

Lang = LanguageSpec | str | None
"""A language spec, its name, or None for Python."""


class RegionError(ValueError):
    """EVOLVE-BLOCK markers that do not pair up; the message names the line."""


@lru_cache(maxsize=None)
def _marker_query(spec: LanguageSpec) -> Query:
    lang = grammar(spec)
    assert lang is not None
    # Comment node names differ by grammar (comment, line_comment, block_comment).
    kinds = [k for k in _COMMENT_KINDS if lang.id_for_node_kind(k, True)]
    alts = " ".join(f"({k})" for k in kinds)
    return Query(lang, f'([{alts}] @m (#match? @m "EVOLVE-BLOCK-(START|END)"))')


@lru_cache(maxsize=1)
def _function_query() -> Query:
    return Query(grammar(PYTHON), "(function_definition name: (identifier) @name) @def")


def parse(source: str, language: Lang = None) -> Tree:
    """The tree-sitter tree of source; ValueError when the language has no grammar."""
    spec = resolve(language)
    lang = grammar(spec)
    if lang is None:
        raise ValueError(f"no tree-sitter grammar for {spec.name}; check the program line by line instead")
    return Parser(lang).parse(source.encode("utf-8"))


def _marker_kind(comment: str, spec: LanguageSpec) -> str | None:
    """START or END when comment (with its opener) is a marker of spec, else None."""
    text = comment.lstrip()
    for opener in sorted(spec.comments, key=len, reverse=True):
        if text.startswith(opener):
            m = _WORDS.match(text[len(opener):].lstrip())
            return m.group(1) if m else None
    return None


def _markers(source: str, spec: LanguageSpec) -> list[tuple[str, int, int]]:
    """(START|END, 1-based line, str index of the marker) in source order."""
    found: list[tuple[str, int, int]] = []
    if grammar(spec) is None:
        pos = 0
        for number, line in enumerate(source.splitlines(keepends=True), start=1):
            kind = _marker_kind(line, spec)
            if kind:
                found.append((kind, number, pos + len(line) - len(line.lstrip())))
            pos += len(line)
        return found
    tree = parse(source, spec)
    off = Offsets(source)
    nodes = sorted(QueryCursor(_marker_query(spec)).captures(tree.root_node).get("m", []), key=lambda n: n.start_byte)
    for node in nodes:
        kind = _marker_kind(node.text.decode("utf-8", "replace"), spec)
        if kind:
            found.append((kind, node.start_point[0] + 1, off.index(node.start_byte)))
    return found


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


def find_regions(source: str, language: Lang = None) -> list[Region]:
    """EVOLVE-BLOCK regions in source order; [] when the program has no markers.

    Raises RegionError for a START without END, an END without START, or nested STARTs.
    """
    regions: list[Region] = []
    open_at: tuple[int, int] | None = None
    for kind, line, idx in _markers(source, resolve(language)):
        if kind == "START":
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


def editable_spans(source: str, language: Lang = None) -> list[tuple[int, int]]:
    """(start, end) str spans that may be edited: the regions, or the whole text without markers."""
    regions = find_regions(source, language)
    if not regions:
        return [(0, len(source))]
    return [(r.start, r.end) for r in regions]


def outside_text(source: str, language: Lang = None) -> list[str]:
    """The fixed parts around the regions (what an edit must leave unchanged)."""
    regions = find_regions(source, language)
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
    """Every Python function definition (methods and nested ones too), decorators included in the span."""
    funcs = _function_query()
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


def syntax_hints(source: str, limit: int = 5, language: Lang = None) -> list[SyntaxProblem]:
    """tree-sitter's ERROR and MISSING nodes with positions; [] without a grammar."""
    spec = resolve(language)
    if grammar(spec) is None:
        return []
    tree = parse(source, spec)
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


def check_syntax(source: str, language: Lang = None) -> SyntaxProblem | None:
    """None if the program parses (or its language has no grammar); otherwise the first problem.

    Python: ``ast.parse`` is the verdict. Other languages: the grammar's first error node."""
    spec = resolve(language)
    if not spec.ast_verdict:
        hints = syntax_hints(source, limit=1, language=spec)
        if not hints:
            return None
        first = hints[0]
        return SyntaxProblem(first.line, first.column, f"{first.message} (tree-sitter {spec.name} grammar)")
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
