"""How the simulated model proposes program patches (program tasks).

It reads the request like an LLM would: the output format from the system message
("evotui-patch-format: ..."), the parent from the fenced block under "## Current program" (its
fence tag names the language, whose comment prefix marks comments and EVOLVE-BLOCK markers),
other programs under "## Other programs", the parent's last change under "## Change that
produced the current program". It answers with real patches built by program-aware rules:
perturb a numeric constant inside the EVOLVE-BLOCK, take a line from another program, revert
the last change, make a structural edit (swap two adjacent independent statements, flip a
comparison, an arithmetic operator, min/max or a boolean connective; this is how programs with no
constants still evolve; when none of these applies, add a term to an expression, code_growth.py),
and, at the rates below, emit malformed blocks, SEARCH text that is not in the program, edits
outside the EVOLVE-BLOCK, syntax errors, or re-indented (still valid) blocks. ``choose_edit`` is
the edit model every layout shares (tagged_program.py renders it in tagged sections).
It builds on what the request shows, as an LLM does (so evolution beats proposals from the seed):
it edits the items the feedback names (blamed_items.py; each fix exposes the next bottleneck).
"""

from __future__ import annotations

import difflib
import random
import re

from engine.code.deleted_lines import line_changes
from engine.code.evolve_blocks import RegionError, find_regions
from engine.code.languages import PYTHON, LanguageSpec, by_fence
from engine.llm.sim import blamed_items, code_growth, directions, prompt_text

P_MALFORMED = 0.05
"""A SEARCH/REPLACE block without its ======= or >>>>>>> REPLACE line."""
P_NOT_FOUND = 0.05
"""SEARCH text with a typo, so it matches nothing."""
P_OUTSIDE = 0.03
"""An edit of a line outside the EVOLVE-BLOCK."""
P_SYNTAX = 0.04
"""A valid block whose new code does not parse."""
P_REINDENT = 0.15
"""A valid block written with different indentation (tolerant matching must apply it)."""
P_REVERT = 0.07
"""Undo (part of) the change that produced the current program."""
P_BORROW = 0.25
"""Take a line from another program shown in the prompt."""
P_TWO_EDITS = 0.3
"""Perturb two constants instead of one."""
P_FIX_ON_RETRY = 0.85
"""A retry after patch errors produces a well-formed patch."""
P_STRUCTURAL = 0.15
"""A structural edit instead of a constant (always, when the program has no constant)."""
REL_STEP = 0.12
"""Relative standard deviation of a float perturbation."""
P_FOLLOW = 0.6
"""A request that states a direction for one of the parent's constants (directions.py: "raise
r", "lower the constant 0.35"; whoever wrote it) gets an edit of that constant in that
direction with this probability; otherwise (and always without such a direction) the edit
model above, unchanged."""
P_BLAME = 0.5
"""A request whose feedback names items of the program's item table ("points (4, 8, 10)",
blamed_items.py) gets, when no stated direction was followed, a perturbation of one of those
items' lines with this probability: the model fixes what the evaluator reports. A request
naming no item draws nothing for it."""
P_AVOID_TRIED = 0.8
"""A request that lists changes already tried on the current program (```diff blocks under a
heading that says "tried", whoever wrote it) gets a fresh draw, with this probability and at
most TRIED_REDRAWS times, when its edit would repeat one of them: a model told what was tried
mostly proposes something else, not always. A draw that repeats nothing listed (and every draw
of a request that lists nothing) is the draw it was: no randomness is spent on the check."""
TRIED_REDRAWS = 2

FORMAT_RE = re.compile(r"evotui-patch-format: (diff|full|udiff)")
_PARENT = re.compile(r"## Current program[^\n]*\n```([\w+-]*)\n(.*?)```", re.S)
# Other tools' layouts (OpenEvolve: "# Current Program" over a fenced block; its diff prompt shows
# the SEARCH/REPLACE format, its full-rewrite prompt asks for the whole program in a fence).
_ANY_PARENT = re.compile(r"^#{1,3}[ \t]*Current program\b[^\n]*\n+```([\w+-]*)\n(.*?)```", re.S | re.M | re.I)
_DIFF_ASKED = re.compile(r"^<<<<<<< SEARCH[ \t]*$", re.M)
_OTHER = re.compile(r"### (?:Program|Inspiration) [^\n]*\n```[\w+-]*\n(.*?)```", re.S)
_CHANGE = re.compile(r"## Change that produced the current program\n```diff\n(.*?)```", re.S)
_TRIED = re.compile(r"^#{2,3}[^\n]*\btried\b[^\n]*\n(.*?)(?=^#{1,2} |\Z)", re.S | re.M | re.I)
_DIFF_BLOCK = re.compile(r"```diff\n(.*?)```", re.S)
_NUM = re.compile(r"(?<![\w.])(\d+\.\d*|\d*\.\d+|\d+)(?![\w.])")


def patch_format(system: str) -> str | None:
    m = FORMAT_RE.search(system or "")
    return m.group(1) if m else None


def request_format(system: str, user: str) -> str | None:
    """The patch format a request asks for: evotui's marker, else read from the layout like an
    LLM would (a current-program heading over a fenced block; SEARCH/REPLACE shown -> diff,
    otherwise a full program), else None (not a program request)."""
    marked = patch_format(system)
    if marked or not _ANY_PARENT.search(user or ""):
        return marked
    return "diff" if _DIFF_ASKED.search(user) or _DIFF_ASKED.search(system or "") else "full"


def _code_part(line: str, lang: LanguageSpec) -> str:
    """line without its trailing comment (so a number in a comment is never 'tuned')."""
    return line.split(lang.comment)[0]


def _editable_lines(code: str, lang: LanguageSpec = PYTHON) -> list[int]:
    lines = code.splitlines()
    try:
        regions = find_regions(code, lang)
    except RegionError:
        regions = []
    if not regions:
        rows = range(len(lines))
    else:
        rows = [i for r in regions for i in range(r.start_line, r.end_line - 1)]
    return [i for i in rows if i < len(lines) and lines[i].strip()
            and not lines[i].lstrip().startswith(lang.comments)]


def _perturb_number(tok: str, rng: random.Random) -> str:
    if "." not in tok:
        v = int(tok)
        return str(max(0, v + rng.choice((-1, 1))))
    v = float(tok)
    decimals = max(2, len(tok.split(".")[1]) + (1 if rng.random() < 0.3 else 0))
    new = v * (1 + rng.gauss(0, REL_STEP)) if abs(v) > 0.02 else v + rng.gauss(0, 0.02)
    out = f"{new:.{min(decimals, 6)}f}"
    return out if out != tok else f"{v + 10 ** -decimals:.{decimals}f}"


def _perturb(code: str, rng: random.Random, lang: LanguageSpec = PYTHON,
             only: list[int] | None = None) -> list[tuple[str, str]] | None:
    """Perturb one literal (two with P_TWO_EDITS) of the editable lines, or of the lines ``only``."""
    lines = code.splitlines()
    rows = [i for i in (_editable_lines(code, lang) if only is None else only) if _NUM.search(_code_part(lines[i], lang))]
    if not rows:
        return None
    edits = []
    for i in rng.sample(rows, min(len(rows), 2 if rng.random() < P_TWO_EDITS else 1)):
        line = lines[i]
        body = _code_part(line, lang)
        nums = list(_NUM.finditer(body))
        m = rng.choice(nums)
        edits.append((line, line[: m.start()] + _perturb_number(m.group(0), rng) + line[m.end():]))
    return edits


# Operator flips that keep a line parseable in every language we know (spaced or guarded forms).
_FLIPS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"<="), "<"), (re.compile(r">="), ">"),
    (re.compile(r"(?<![<>=!\-])<(?![<=>\-])"), "<="), (re.compile(r"(?<![<>=\-])>(?![>=])"), ">="),
    (re.compile(r" \+ "), " - "), (re.compile(r" - "), " + "), (re.compile(r" \* "), " / "),
    (re.compile(r"\bmin\("), "max("), (re.compile(r"\bmax\("), "min("),
    (re.compile(r" and "), " or "), (re.compile(r" or "), " and "), (re.compile(r"&&"), "||"), (re.compile(r"\|\|"), "&&"),
)
_OPENS_OR_CLOSES = (":", "{", "}", "(", "[", ",", "\\", "then", "do", "begin")
_FLOW = re.compile(r"^\s*(return|break|continue|else|elif|elseif|end|}|def |fn |func |function |if |for |while )")


def _structural(code: str, rng: random.Random, lang: LanguageSpec = PYTHON) -> tuple[list[tuple[str, str]], str] | None:
    """A structural edit: swap two adjacent simple statements, or flip one operator."""
    lines = code.splitlines()
    rows = _editable_lines(code, lang)
    editable = set(rows)
    swaps = [i for i in rows if i + 1 in editable and _indent(lines[i]) == _indent(lines[i + 1])
             and lines[i].strip() != lines[i + 1].strip()
             and not any(_code_part(lines[j], lang).rstrip().endswith(_OPENS_OR_CLOSES) or _FLOW.match(lines[j])
                         for j in (i, i + 1))
             and code.count(lines[i] + "\n" + lines[i + 1]) == 1]
    flips = [(i, pat, rep) for i in rows if lines.count(lines[i]) == 1
             for pat, rep in _FLIPS if pat.search(_code_part(lines[i], lang))]
    if swaps and (not flips or rng.random() < 0.5):
        i = rng.choice(swaps)
        return [(lines[i] + "\n" + lines[i + 1], lines[i + 1] + "\n" + lines[i])], "Reorder two statements."
    if flips:
        i, pat, rep = rng.choice(flips)
        body = _code_part(lines[i], lang)
        m = rng.choice(list(pat.finditer(body)))
        return [(lines[i], lines[i][: m.start()] + rep + lines[i][m.end():])], "Change the logic of one step."
    return None


def _lhs(line: str) -> str | None:
    m = re.match(r"\s*([\w\[\]., ]+?)\s*=(?!=)", line)
    return m.group(1) if m else None


def _borrow(code: str, others: list[str], rng: random.Random,
            lang: LanguageSpec = PYTHON) -> list[tuple[str, str]] | None:
    lines = code.splitlines()
    rows = _editable_lines(code, lang)
    for other in rng.sample(others, len(others)):
        mine = {_lhs(lines[i]): lines[i] for i in rows if _lhs(lines[i])}
        cands = [(mine[_lhs(ln)], ln) for ln in other.splitlines()
                 if _lhs(ln) in mine and mine[_lhs(ln)].strip() != ln.strip() and lines.count(mine[_lhs(ln)]) == 1]
        if cands:
            old, new = rng.choice(cands)
            return [(old, _indent(old) + new.strip())]
        sm = difflib.SequenceMatcher(None, lines, other.splitlines())
        for tag, a, b, c, d in sm.get_opcodes():
            if tag == "replace" and b - a == d - c == 1 and a in rows and lines.count(lines[a]) == 1:
                return [(lines[a], other.splitlines()[c])]
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _revert(code: str, change: str) -> list[tuple[str, str]] | None:
    minus = [ln[1:] for ln in change.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in change.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    if len(minus) == len(plus) and plus and all(code.count(p) == 1 for p in plus):
        return list(zip(plus, minus))
    return None


def _blocks(edits: list[tuple[str, str]], reindent: bool = False) -> str:
    out = []
    for old, new in edits:
        if reindent:
            old, new = "    " + old, "    " + new
        out.append(f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE")
    return "\n".join(out)


def render(code: str, edits: list[tuple[str, str]], fmt: str, rng: random.Random, reason: str,
            lang: LanguageSpec = PYTHON) -> str:
    if fmt == "diff":
        return f"{reason}\n{_blocks(edits, reindent=rng.random() < P_REINDENT)}"
    new = code
    for old, rep in edits:
        new = new.replace(old, rep, 1)
    if fmt == "full":
        return f"{reason}\n```{lang.fence}\n{new.rstrip()}\n```"
    diff = "".join(difflib.unified_diff(code.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/program{lang.suffix}", tofile=f"b/program{lang.suffix}", n=2))
    return f"{reason}\n```diff\n{diff}```"


def _directed_targets(code: str, request: str, lang: LanguageSpec) -> list[tuple[int, str, bool]]:
    """(line index, target, up) for each direction the request states about an editable constant."""
    lines = code.splitlines()
    targets = directions.assigned_targets({i: lines[i] for i in _editable_lines(code, lang)}, lang.comment)
    return [(targets[t], t, up) for t, up in directions.directives(request, set(targets))]


def _blamed(code: str, request: str, lang: LanguageSpec) -> list[int]:
    """Editable lines holding the items the request's feedback names (blamed_items.py), once each
    (a line that occurs twice cannot be named by one SEARCH block)."""
    lines = code.splitlines()
    found = blamed_items.blamed_rows(lines, _editable_lines(code, lang), lang.comment, request)
    return sorted({i for i in found if lines.count(lines[i]) == 1})


def _directed(code: str, row: int, target: str, up: bool, rng: random.Random,
              lang: LanguageSpec = PYTHON) -> list[tuple[str, str]] | None:
    """Move one number of the target's line (the literal itself, for a literal target) its way,
    by the same step sizes as an undirected perturbation."""
    line = code.splitlines()[row]
    body = _code_part(line, lang)
    nums = [m for m in _NUM.finditer(body) if m.group(0) == target] or list(_NUM.finditer(body))
    if not nums:
        return None
    m = rng.choice(nums)
    tok, sign = m.group(0), 1 if up else -1
    if "." not in tok:
        new = str(max(0, int(tok) + sign))
    else:  # the undirected perturbation's step and precision, with the stated sign
        v = float(tok)
        decimals = max(2, len(tok.split(".")[1]) + (1 if rng.random() < 0.3 else 0))
        step = abs(rng.gauss(0, REL_STEP)) * abs(v) if abs(v) > 0.02 else abs(rng.gauss(0, 0.02))
        new = f"{v + sign * step:.{min(decimals, 6)}f}"
        if new == tok:
            new = f"{v + sign * 10 ** -decimals:.{decimals}f}"
    if new == tok:
        return None
    return [(line, line[: m.start()] + new + line[m.end():])]


def _broken(code: str, rng: random.Random, lang: LanguageSpec = PYTHON) -> str:
    """A realistic failure: malformed block, wrong SEARCH, edit outside the block or a syntax error."""
    lines = code.splitlines()
    editable = _editable_lines(code, lang)
    rows = editable or list(range(len(lines)))
    line = lines[rng.choice(rows)]
    roll = rng.random() * (P_MALFORMED + P_NOT_FOUND + P_OUTSIDE + P_SYNTAX)
    if roll < P_MALFORMED:
        return f"Tweak one line.\n<<<<<<< SEARCH\n{line}\n>>>>>>> REPLACE\n{line}  {lang.comment} tweaked"
    roll -= P_MALFORMED
    if roll < P_NOT_FOUND:
        return f"Adjust a constant.\n<<<<<<< SEARCH\n{line}_typo = 1\n=======\n{line}\n>>>>>>> REPLACE"
    roll -= P_NOT_FOUND
    outside = [i for i in range(len(lines)) if i not in set(editable) and lines[i].strip()
               and "EVOLVE-BLOCK" not in lines[i] and lines.count(lines[i]) == 1]
    if roll < P_OUTSIDE and outside:
        old = lines[rng.choice(outside)]
        return f"Clean up the driver.\n<<<<<<< SEARCH\n{old}\n=======\n{old}  {lang.comment} cleaned\n>>>>>>> REPLACE"
    return f"Restructure a line.\n<<<<<<< SEARCH\n{line}\n=======\n{line.rstrip(':')} ((:\n>>>>>>> REPLACE"


def find_parent(text: str) -> tuple[LanguageSpec, str] | None:
    """(language, code) of the current program a request shows under a current-program heading."""
    m = _PARENT.search(text) or _ANY_PARENT.search(text)
    return (by_fence(m.group(1)) or PYTHON, m.group(2)) if m else None


def _changed_lines(diff_lines: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(removed, added) lines of a unified diff, stripped: what a change does, wherever it is shown."""
    removed = frozenset(ln[1:].strip() for ln in diff_lines if ln.startswith("-") and not ln.startswith("---"))
    added = frozenset(ln[1:].strip() for ln in diff_lines if ln.startswith("+") and not ln.startswith("+++"))
    return removed, added


def tried_changes(request: str) -> list[tuple[frozenset[str], frozenset[str]]]:
    """The changes a request lists as already tried (```diff blocks under a "tried" heading)."""
    return [_changed_lines(d.splitlines()) for section in _TRIED.findall(request) for d in _DIFF_BLOCK.findall(section)]


def _change_of(code: str, edits: list[tuple[str, str]]) -> tuple[frozenset[str], frozenset[str]]:
    """(removed, added) lines of the program these edits make, as _changed_lines gives a listed diff's."""
    child = code
    for old, new in edits:
        child = child.replace(old, new, 1)
    added, removed = line_changes(code, child)
    return frozenset(ln.strip() for ln in removed), frozenset(ln.strip() for ln in added)


def choose_edit(code: str, lang: LanguageSpec, fmt: str, request: str, others: list[str],
                change: str | None, retry: bool, rng: random.Random) -> tuple[str, list[tuple[str, str]] | str | None]:
    """The edit model, shared by every layout: (reason, edits), or (reason, raw SEARCH/REPLACE
    text) for a failure path, or (reason, None) when nothing can be changed. ``request`` is the
    prose that may state directions and list changes already tried, ``others`` other programs
    shown, ``change`` the diff that produced the parent (if shown). The random draws are the same
    whoever asks."""
    tried = tried_changes(request)
    for _ in range(TRIED_REDRAWS):
        reason, edits = _draw_edit(code, lang, fmt, request, others, change, retry, rng)
        if not (tried and isinstance(edits, list) and _change_of(code, edits) in tried) or rng.random() >= P_AVOID_TRIED:
            return reason, edits
    return _draw_edit(code, lang, fmt, request, others, change, retry, rng)


def _draw_edit(code: str, lang: LanguageSpec, fmt: str, request: str, others: list[str],
               change: str | None, retry: bool, rng: random.Random) -> tuple[str, list[tuple[str, str]] | str | None]:
    """One draw of the edit model (choose_edit)."""
    p_bad = 1 - P_FIX_ON_RETRY if retry else P_MALFORMED + P_NOT_FOUND + P_OUTSIDE + P_SYNTAX
    if fmt == "diff" and rng.random() < p_bad:
        reason, _, blocks = _broken(code, rng, lang).partition("\n")
        return reason, blocks
    if lang.name == "text":  # a prompt evolved as a file: a prompt engineer's edits, not a coder's
        reason, edits = prompt_text.choose_edit(code, others, rng)
        return reason, edits
    edits, reason = None, ""
    directed = _directed_targets(code, request, lang)
    if directed and rng.random() < P_FOLLOW:  # no draw without a direction: unguided replies unchanged
        row, target, up = rng.choice(directed)
        edits = _directed(code, row, target, up, rng, lang)
        reason = f"Follow the stated direction: {'raise' if up else 'lower'} {target}."
    blamed = [] if edits else _blamed(code, request, lang)
    if blamed and rng.random() < P_BLAME:  # no draw without blamed items: replies unchanged
        edits, reason = _perturb(code, rng, lang, only=blamed), "Move the items the feedback names."
    if not edits:
        roll = rng.random()
        if roll < P_REVERT and change is not None:
            edits, reason = _revert(code, change), "The last change looks harmful; revert it."
        elif roll < P_REVERT + P_BORROW:
            edits, reason = (_borrow(code, others, rng, lang) if others else None), "Adopt a setting from a better program."
    if not edits and rng.random() >= P_STRUCTURAL:
        edits, reason = _perturb(code, rng, lang), "Tune a constant of the construction."
    if not edits:
        structural = _structural(code, rng, lang)
        if structural is not None:
            edits, reason = structural
    if not edits:
        edits, reason = _perturb(code, rng, lang), "Tune a constant of the construction."
    if not edits:  # nothing else applies (no constant, no step to swap or flip): grow the code
        grown = code_growth.added_term(code.splitlines(), _editable_lines(code, lang), rng, lang)
        if grown is not None:
            edits, reason = grown
    return reason, edits or None


NO_CHANGE = "The program has no constant and no step I can change; I have no change to propose."


def propose(messages: list[dict], text_of, rng: random.Random) -> str:
    """Reply to a program-task proposal request (first attempt or retry)."""
    system = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
    users = [text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    first = users[0] if users else ""
    fmt = request_format(system, first) or "diff"
    parent = find_parent(first)
    if not parent:
        return "I could not find the current program in the request."
    lang, code = parent
    retry = len(users) > 1 and users[-1].startswith("## Patch errors")
    change = _CHANGE.search(first)
    reason, edits = choose_edit(code, lang, fmt, first, _OTHER.findall(first),
                                change.group(1) if change else None, retry, rng)
    if isinstance(edits, str):
        return f"{reason}\n{edits}"
    if not edits:
        return NO_CHANGE
    return render(code, edits, fmt, rng, reason, lang)
