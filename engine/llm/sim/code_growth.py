"""A structural edit for code with nothing else to change: add a term to one expression.

The edit model (program_model.py) tunes constants, borrows lines, reverts, swaps statements and
flips operators. A program such as ``def f(x): return x`` offers none of these, so a model
limited to them can never move it. What a model does then is grow the code: it adds a term built
from a variable the expression already uses (``x`` -> ``x - 0.17 * x * x * x``), which also gives
the next proposals a constant to tune. The term's sign, power (2 or 3) and coefficient are drawn
at random, so the edit knows no task: on one program it helps, on another it hurts.

It is tried only when no other edit applies, so every request that had an edit before gets the
reply it got before (pinned in tests/engine/test_sim_replies.py).
"""

from __future__ import annotations

import random
import re

from engine.code.languages import LanguageSpec

# `return EXPR` or `TARGET = EXPR` (an optional `;` for C-like languages), one line.
_STEP = re.compile(r"^(?P<head>\s*(?:return\s+|[A-Za-z_][\w.\[\]]*\s*=(?!=)\s*))(?P<expr>[^;]+?)(?P<end>;?)\s*$")
_NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?![\w(.\[])")
_NOT_VARIABLES = frozenset(
    "and or not in is if else for while lambda return None True False self cls def class "
    "null nil true false new this let var const end then do".split())
_SIMPLE = re.compile(r"[\w\s.*/+\-()\[\]]+")


def added_term(lines: list[str], rows: list[int], rng: random.Random,
               lang: LanguageSpec) -> tuple[list[tuple[str, str]], str] | None:
    """One (old line, new line) edit adding ``± c * v * v [* v]`` to an expression of an editable
    row (``rows``, indices into ``lines``), or None when no row is a single-line return or
    assignment over a variable. Draws from ``rng`` only once a row is found."""
    cands = []
    for i in rows:
        line = lines[i]
        if lang.comment in line or '"' in line or "'" in line or lines.count(line) != 1:
            continue
        m = _STEP.match(line)
        if not m:
            continue
        names = [n for n in _NAME.findall(m.group("expr")) if n not in _NOT_VARIABLES]
        if names:
            cands.append((i, m, names))
    if not cands:
        return None
    i, m, names = rng.choice(cands)
    var = rng.choice(names)
    power = rng.choice((2, 3))
    sign = rng.choice(("+", "-"))
    coef = f"{rng.uniform(0.05, 0.5):.2f}"
    expr = m.group("expr").rstrip()
    simple = _SIMPLE.fullmatch(expr) and not re.search(r"\b(and|or|not|if|else|lambda)\b", expr)
    base = expr if simple else f"({expr})"
    term = " * ".join([var] * power)
    new = f"{m.group('head')}{base} {sign} {coef} * {term}{m.group('end')}"
    return [(lines[i], new)], "Add a term to one step."
