"""Directions in a request: how the simulated model reads "which way a constant moved" and
"which way to move it" from text, whoever wrote the text.

Three readers, all deterministic functions of the text (no randomness, no task knowledge):

- `moves(text)`: the numeric moves in the unified-diff lines of a text (a removed line and an
  added line that are equal up to their numbers, the line assigning a name: `r = 0.1` ->
  `r = 0.11` is "r up"). Summarizers report them; they are facts of the diff.
- `reported(text)`: moves stated in prose: "raises r", "raising r", "lowers k", "lowering k".
- `directives(text, targets)`: imperative directions in prose outside code fences: "raise r",
  "increase the constant 0.35", "lower k", "decrease ...", "reduce ..."; a directive whose
  clause is negated ("do not", "never", "avoid", "don't") is not one. Only targets the caller
  names count (the proposer passes the assigned names and numeric literals of its parent's
  editable lines), so a word like "reduce" in a task description names nothing.

The proposer (program_model.py) follows a directive with P_FOLLOW; any strategy, tool or user
text that states one gets the same treatment, so what helps is whether the direction is right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = re.compile(r"(?<![\w.])[-+]?(\d+\.\d*|\d*\.\d+|\d+)(?![\w.])")
_LHS = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")
_FENCE = re.compile(r"```.*?(```|\Z)", re.S)
_DIRECTIVE = re.compile(r"\b(raise|increase|lower|decrease|reduce)\s+(?:the\s+)?(?:constant\s+|value\s+of\s+)?"
                        r"`?([A-Za-z_]\w*|\d+\.\d+|\d+)`?", re.I)
_NEGATION = re.compile(r"\b(not|never|avoid|don't|dont|no)\b[^.;:\n]*$", re.I)
_REPORTED = re.compile(r"\b(raises|raising|raised|lowers|lowering|lowered)\s+`?([A-Za-z_]\w*)`?", re.I)
UP_WORDS = ("raise", "increase", "raises", "raising", "raised")


@dataclass(frozen=True)
class Move:
    name: str
    up: bool
    old: str
    new: str

    def describe(self) -> str:
        return f"{'raises' if self.up else 'lowers'} {self.name} ({self.old} -> {self.new})"


def _skeleton(line: str) -> str:
    return _NUM.sub("#", line.strip())


def moves(text: str) -> list[Move]:
    """Numeric moves of named assignments in the diff lines of `text`, in order, one per name."""
    removed = [ln[1:] for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:] for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    out: dict[str, Move] = {}
    used: set[int] = set()
    for old in removed:
        m = _LHS.match(old)
        if not m:
            continue
        for j, new in enumerate(added):
            if j in used or _skeleton(new) != _skeleton(old) or not _LHS.match(new):
                continue
            pairs = [(a.group(0), b.group(0)) for a, b in zip(_NUM.finditer(old), _NUM.finditer(new))
                     if a.group(0) != b.group(0)]
            ups = {float(b) > float(a) for a, b in pairs}
            used.add(j)
            if len(ups) == 1 and m.group(1) not in out:
                out[m.group(1)] = Move(m.group(1), ups.pop(), pairs[0][0], pairs[0][1])
            break
    return list(out.values())


def reported(text: str) -> list[tuple[str, bool]]:
    """(name, up) of moves stated in prose, in order."""
    return [(m.group(2), m.group(1).lower() in UP_WORDS) for m in _REPORTED.finditer(text)]


def directives(text: str, targets: set[str]) -> list[tuple[str, bool]]:
    """(target, up) of the imperative directions in `text` outside fences naming one of `targets`
    (no repeats; a later contrary directive for the same target replaces the earlier)."""
    prose = _FENCE.sub("", text)
    found: dict[str, bool] = {}
    for m in _DIRECTIVE.finditer(prose):
        target = m.group(2)
        if target not in targets:
            continue
        clause_start = max(prose.rfind(sep, 0, m.start()) for sep in (".", "\n", ";", ":"))
        if _NEGATION.search(prose[clause_start + 1: m.start()]):
            continue
        found.pop(target, None)
        found[target] = m.group(1).lower() in UP_WORDS
    return list(found.items())


def assigned_targets(lines: dict[int, str], comment: str = "#") -> dict[str, int]:
    """Directive targets of a program's editable lines (index -> line): each assigned name with a
    number on its line, and each float literal, mapped to its line index (first occurrence)."""
    out: dict[str, int] = {}
    for i, line in sorted(lines.items()):
        code = line.split(comment)[0]
        nums = [m.group(0) for m in _NUM.finditer(code)]
        if not nums:
            continue
        m = _LHS.match(code)
        if m:
            out.setdefault(m.group(1), i)
        for n in nums:
            if "." in n:
                out.setdefault(n.lstrip("+-"), i)
    return out
