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

A fourth reader infers directions nobody states, from scored programs shown side by side:

- `inferred(parent, parent_score, others, comment)`: for each literal of the parent whose line
  appears (numbers aside) in another program shown with a score, the way from the worse of the
  two values to the better one; votes over all programs shown, ties say nothing. `scored_blocks`
  and `parent_score` read the scores as a request states them (a fence's heading line naming
  `combined_score`, `score` or `fitness`, else the prose right after the fence, as ShinkaEvolve's
  "Combined score to maximize: 0.40"; for the parent, else the first score stated in other
  prose, as OpenEvolve's "- Fitness: 0.5").
  The proposer follows one with P_INFER: in-context optimisation, as OPRO observed (Yang et
  al. 2023, "Large Language Models as Optimizers": shown earlier solutions with their scores,
  the model proposes along the trend they show). A request without scored programs (a
  proposal from the seed alone) infers nothing.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_NUM = re.compile(r"(?<![\w.])[-+]?(\d+\.\d*|\d*\.\d+|\d+)(?![\w.])")
TOKEN = re.compile(r"(?<![\w.])(\d+\.\d*|\d*\.\d+|\d+)(?![\w.])")
"""A numeric literal as written (no sign): what the proposer edits, so inference counts the same."""
_BLOCK = re.compile(r"```[\w+-]*\n(.*?)```", re.S)
_SCORE = re.compile(r"\b(?:combined[_ ]score|score|fitness)\b(?:\s+to\s+maximi[sz]e)?\W{0,3}?"
                    r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", re.I)
_NEXT = re.compile(r"^(?:#|```)", re.M)
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


def _tail(text: str, end: int) -> str:
    """The prose after a block up to the next heading or fence (where ShinkaEvolve states metrics)."""
    nxt = _NEXT.search(text, end)
    return text[end: nxt.start() if nxt else len(text)]


def scored_blocks(text: str) -> list[tuple[float, str]]:
    """(score, code) of each fenced block whose heading (the last line above its fence) states a
    score, else whose prose after it, before the next heading or fence, does."""
    out = []
    for m in _BLOCK.finditer(text):
        head = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        s = _SCORE.search(head) or _SCORE.search(_tail(text, m.end()))
        if s:
            out.append((float(s.group(1)), m.group(1)))
    return out


def parent_score(text: str, parent: str) -> float | None:
    """The parent's score: its own block's heading, else the first score stated in prose that is
    not another block's heading (OpenEvolve states the current program's fitness or metrics
    above its history)."""
    for score, code in scored_blocks(text):
        if code == parent:
            return score
    heads = set()
    for m in _BLOCK.finditer(text):
        heads.add(text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1])
    prose = [ln for ln in _FENCE.sub("", text).splitlines() if ln not in heads]
    m = _SCORE.search("\n".join(prose))
    return float(m.group(1)) if m else None


def _numbers(line: str, comment: str) -> list[str]:
    return [m.group(0) for m in TOKEN.finditer(line.split(comment)[0])]


def inferred(parent: str, score: float | None, others: list[tuple[float, str]],
             comment: str = "#") -> list[tuple[int, int, bool]]:
    """(line index, index of the literal in the line's code, up) for each literal of `parent` that
    scored programs in `others` say to move: a line equal up to its numbers (aligned in order)
    whose literal differs votes for the value of the better of the two programs; the sign of the
    votes decides, a tie says nothing. Deterministic; empty without a parent score."""
    if score is None:
        return []
    lines = parent.splitlines()
    mine = [TOKEN.sub("#", ln.split(comment)[0].strip()) for ln in lines]
    votes: dict[tuple[int, int], int] = {}
    for other_score, code in others:
        if other_score == score or code == parent:
            continue
        better = 1 if other_score > score else -1
        theirs = code.splitlines()
        skeletons = [TOKEN.sub("#", ln.split(comment)[0].strip()) for ln in theirs]
        matcher = difflib.SequenceMatcher(None, mine, skeletons, autojunk=False)
        for a, b, size in matcher.get_matching_blocks():
            for i, j in zip(range(a, a + size), range(b, b + size)):
                for k, (x, y) in enumerate(zip(_numbers(lines[i], comment), _numbers(theirs[j], comment))):
                    if float(x) != float(y):
                        votes[(i, k)] = votes.get((i, k), 0) + better * (1 if float(y) > float(x) else -1)
    return [(i, k, v > 0) for (i, k), v in sorted(votes.items()) if v]


def request_inferred(code: str, request: str, comment: str = "#") -> list[tuple[int, int, bool]]:
    """`inferred` for the parent `code` from the scored programs and parent score a request shows."""
    others = [(score, other) for score, other in scored_blocks(request) if other != code]
    return inferred(code, parent_score(request, code), others, comment) if others else []


def not_worse(code: str, request: str, others: list[str]) -> list[str]:
    """The programs shown worth borrowing from: all of them, less those the request scores below
    the parent `code` (a model that reads the scores does not copy a setting from a worse program)."""
    scored = scored_blocks(request)
    mine = parent_score(request, code) if scored else None
    if mine is None:
        return others
    worse = {other for score, other in scored if score < mine}
    return [o for o in others if o not in worse]
