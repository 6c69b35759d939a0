"""Numeric knobs of a program for `evotui tune`: found with tree-sitter, ranked, rewritten into a
PARAMS block (EvoTrace §5.4 / B.9).

A knob is one numeric literal at one byte position (so two equal literals are two knobs, never an
ambiguous text replacement). Literals inside the EVOLVE-BLOCK regions are considered when the
program has any, else the whole file. Left out: integers with |value| <= 2 (indices, exponents,
parities), literals in subscripts and in shape/range arguments (array shapes, loop bounds), and
problem sizes (an integer assigned to n, N, n_*, num_*, dim). Zero is kept only when it is a whole
assigned value (`stagger = 0.0`). The rest is ranked: a literal that is a whole assigned value
first (it has a name), floats before integers, then source order; the top `limit` are the knobs.

Python candidates only: the PARAMS dict goes after the module docstring and the imports, each
knob's literal becomes PARAMS["name"] (a negative literal keeps its sign outside).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tree_sitter import Node, Parser

from engine.code.evolve_blocks import RegionError, find_regions
from engine.code.languages import PYTHON, LanguageSpec, grammar
from engine.trace.errors import TraceError

MAX_KNOBS = 8
_SIZE_NAME = re.compile(r"^(n|N|n_\w+|num_\w+|N_\w+|dim|ndim|d)$")
_SHAPE_CALLS = {"range", "zeros", "ones", "empty", "full", "reshape", "arange", "linspace", "eye", "shape",
                "randint", "choice", "tile", "repeat"}


@dataclass(frozen=True)
class Knob:
    name: str
    start: int
    """Byte offset of the literal in the source (UTF-8)."""
    end: int
    literal: str
    line: int
    """1-based line of the literal."""
    kind: str
    """"int" or "float"."""
    default: float
    low: float
    high: float
    log: bool
    named: bool = False
    """The literal is the whole value of an assignment (its name comes from the target)."""

    def cast(self, value: float) -> int | float:
        return int(round(value)) if self.kind == "int" else float(value)

    def as_dict(self) -> dict:
        return {"name": self.name, "literal": self.literal, "line": self.line, "kind": self.kind,
                "default": self.default, "low": self.low, "high": self.high, "scale": "log" if self.log else "linear"}


def default_range(value: float, kind: str) -> tuple[float, float, bool]:
    """(low, high, log) around a default: integers x//2..2x (linear, at least 1), positive floats
    x/2..2x (log), zero -0.1..0.1 (linear). Values are magnitudes (a literal has no sign). The
    paper's ranges are wider (x/100..100x for weights); with 24 evaluations over up to 8 knobs a
    factor of 2 either way keeps the search near the evolved program (on the 200-proposal
    circle-packing run x/5..5x found nothing better than the evolved values, x/2..2x did)."""
    if kind == "int":
        v = int(value)
        return float(max(1, v // 2)), float(v * 2), False
    if value == 0:
        return -0.1, 0.1, False
    return value / 2, value * 2, True


def _parse_number(text: str) -> tuple[str, float] | None:
    clean = text.replace("_", "")
    try:
        if re.fullmatch(r"[0-9]+", clean):
            return "int", float(int(clean))
        value = float(clean)
    except ValueError:
        return None  # hex, octal, complex: not a knob
    return ("float", value) if math.isfinite(value) else None


def _spans(source: str, language: LanguageSpec) -> list[tuple[int, int]]:
    """Byte ranges of the EVOLVE-BLOCK regions, or the whole file."""
    try:
        regions = find_regions(source, language)
    except RegionError:
        regions = []
    if not regions:
        return [(0, len(source.encode("utf-8")))]
    return [(len(source[:r.start].encode("utf-8")), len(source[:r.end].encode("utf-8"))) for r in regions]


def _assigned_name(node: Node) -> str | None:
    """The target name when node (or -node) is the whole right-hand side of `name = literal`, or
    the key of a dict entry `"name": literal` (a PARAMS block tuned before)."""
    top = node.parent if node.parent is not None and node.parent.type == "unary_operator" else node
    parent = top.parent
    if parent is not None and parent.type == "pair":  # {"rate": 0.5}: named by its string key
        key, value = parent.child_by_field_name("key"), parent.child_by_field_name("value")
        if key is not None and key.type == "string" and value is not None and value.id == top.id:
            text = key.text.decode("utf-8").strip("'\"")
            return text if text.isidentifier() else None
        return None
    if parent is None or parent.type not in ("assignment", "augmented_assignment", "keyword_argument", "default_parameter"):
        return None
    value = parent.child_by_field_name("right") or parent.child_by_field_name("value")
    target = parent.child_by_field_name("left") or parent.child_by_field_name("name")
    if value is None or value.id != top.id or target is None or target.type != "identifier":
        return None
    return target.text.decode("utf-8")


def _excluded(node: Node) -> bool:
    cur = node.parent
    while cur is not None and cur.type not in ("block", "module", "expression_statement"):
        if cur.type in ("subscript", "slice"):
            return True
        if cur.type == "call":
            fn = cur.child_by_field_name("function")
            fname = fn.text.decode("utf-8").rsplit(".", 1)[-1] if fn is not None else ""
            if fname in _SHAPE_CALLS:
                return True
        cur = cur.parent
    return False


def _literals(root: Node):
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in ("integer", "float"):
            yield node
            continue
        stack.extend(reversed(node.children))


def find_knobs(source: str, language: LanguageSpec = PYTHON, limit: int = MAX_KNOBS) -> list[Knob]:
    """The program's tunable literals, best-ranked first, at most `limit`."""
    if language.name != "python":
        raise TraceError(f"tune rewrites Python candidates only; this one is {language.name}")
    lang = grammar(language)
    tree = Parser(lang).parse(source.encode("utf-8"))
    spans = _spans(source, language)
    found: list[Knob] = []
    used: dict[str, int] = {}
    for node in _literals(tree.root_node):
        if not any(a <= node.start_byte and node.end_byte <= b for a, b in spans):
            continue
        text = node.text.decode("utf-8")
        parsed = _parse_number(text)
        if parsed is None:
            continue
        kind, value = parsed  # the magnitude: a minus sign stays in the source
        name = _assigned_name(node)
        if kind == "int" and value <= 2:
            continue
        if value == 0 and name is None:
            continue
        if name is not None and kind == "int" and _SIZE_NAME.match(name):
            continue
        if name is None and _excluded(node):
            continue
        base = name or f"k_line{node.start_point[0] + 1}"
        used[base] = used.get(base, 0) + 1
        label = base if used[base] == 1 else f"{base}_{used[base]}"
        lo, hi, log = default_range(value, kind)
        found.append(Knob(name=label, start=node.start_byte, end=node.end_byte, literal=text,
                          line=node.start_point[0] + 1, kind=kind, default=value, low=lo, high=hi, log=log,
                          named=name is not None))
    ranked = sorted(range(len(found)), key=lambda i: (not found[i].named, found[i].kind != "float", i))
    return [found[i] for i in ranked[:limit]]


def _insert_at(source: str) -> int:
    """Byte offset after the module docstring and the top-of-file imports (and __future__)."""
    lang = grammar(PYTHON)
    tree = Parser(lang).parse(source.encode("utf-8"))
    pos = 0
    for child in tree.root_node.children:
        if child.type in ("import_statement", "import_from_statement", "future_import_statement", "comment"):
            pos = child.end_byte
        elif child.type == "expression_statement" and child.children and child.children[0].type == "string" and pos == 0:
            pos = child.end_byte
        else:
            break
    return pos


def _value_text(knob: Knob, value: float) -> str:
    v = knob.cast(value)
    return repr(v)


def params_block(knobs: list[Knob], values: dict[str, float]) -> str:
    body = "".join(f"    {k.name!r}: {_value_text(k, values[k.name])},\n" for k in knobs)
    return f"\n\n# Tuned by `evotui tune` (numeric knobs of the evolved program).\nPARAMS = {{\n{body}}}\n"


def rewrite(source: str, knobs: list[Knob], values: dict[str, float] | None = None) -> str:
    """The program with each knob's literal replaced by PARAMS["name"] and a PARAMS block holding
    `values` (default: the knobs' own defaults)."""
    if not knobs:
        raise TraceError("no numeric knobs to rewrite")
    values = values or {k.name: k.default for k in knobs}
    data = source.encode("utf-8")
    for k in sorted(knobs, key=lambda k: k.start, reverse=True):
        data = data[:k.start] + f"PARAMS[{k.name!r}]".encode("utf-8") + data[k.end:]
    at = _insert_at(source)  # before any knob (knobs sit in code after the imports)
    if any(k.start < at for k in knobs):
        at = 0
    block = params_block(knobs, values).encode("utf-8")
    if at == 0:
        block = block.lstrip(b"\n") + b"\n"
    return (data[:at] + block + data[at:]).decode("utf-8")
