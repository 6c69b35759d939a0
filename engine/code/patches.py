"""Patches from LLM replies: SEARCH/REPLACE blocks, full rewrites and unified diffs.

Matching is tolerant: an exact match first, then line by line ignoring trailing whitespace, then
ignoring indentation, runs of spaces and blank lines (the REPLACE text is re-indented by the same
offset). Every block that cannot be applied gets its own precise error, meant to go back to the
LLM. Edits must stay inside the EVOLVE-BLOCK regions (the whole file when there are none).
The candidate's language (default Python) decides the marker comments and the fence tag.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from engine.code.evolve_blocks import END, START, Lang, RegionError, editable_spans, find_regions, line_of, outside_text
from engine.code.languages import resolve

FORMATS = ("diff", "full", "udiff")
"""diff: SEARCH/REPLACE blocks (default); full: the whole program; udiff: a unified diff."""

_SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.S)
_HUNK = re.compile(r"^@@ .*@@")
_MARKER = re.compile(r"EVOLVE-BLOCK-(START|END)")
"""Marker words after any comment prefix (#, //, !): a block must keep the ones it quotes."""
MAX_SHOWN = 600
"""Characters of nearby program text quoted in a 'not found' error."""


@dataclass(frozen=True)
class Block:
    index: int
    """1-based position in the reply (as the LLM would count)."""
    search: str
    replace: str


@dataclass
class PatchResult:
    text: str | None
    """The patched program, or None when any block or the reply failed."""
    errors: list[str] = field(default_factory=list)
    applied: int = 0
    tolerant: int = 0
    """Blocks that needed whitespace-tolerant matching."""
    region_violations: int = 0

    @property
    def ok(self) -> bool:
        return self.text is not None and not self.errors


# -- parsing ---------------------------------------------------------------------------------
def parse_search_replace(reply: str) -> tuple[list[Block], list[str]]:
    """Blocks of a reply and an error for each malformed one (missing divider or REPLACE line)."""
    blocks: list[Block] = []
    errors: list[str] = []
    lines = (reply or "").splitlines()
    i, n = 0, 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        n += 1
        j = i + 1
        search: list[str] = []
        while j < len(lines) and not _DIVIDER.match(lines[j]) and not _SEARCH.match(lines[j]) and not _REPLACE.match(lines[j]):
            search.append(lines[j])
            j += 1
        if j >= len(lines) or not _DIVIDER.match(lines[j]):
            errors.append(f"block {n}: no ======= line after <<<<<<< SEARCH (line {i + 1} of your reply); "
                          "each block is <<<<<<< SEARCH, old lines, =======, new lines, >>>>>>> REPLACE")
            i = j
            continue
        k = j + 1
        replace: list[str] = []
        while k < len(lines) and not _REPLACE.match(lines[k]) and not _SEARCH.match(lines[k]):
            replace.append(lines[k])
            k += 1
        if k >= len(lines) or not _REPLACE.match(lines[k]):
            errors.append(f"block {n}: no >>>>>>> REPLACE line closes the block opened at line {i + 1} of your reply")
            i = k
            continue
        blocks.append(Block(n, "\n".join(search), "\n".join(replace)))
        i = k + 1
    return blocks, errors


def extract_code(reply: str, language: Lang = None) -> str | None:
    """The last fenced block of a reply, preferring ones tagged with the candidate's language."""
    blocks = _FENCE.findall(reply or "")
    if not blocks:
        return None
    tags = resolve(language).fence_tags
    tagged = [body for lang, body in blocks if lang.lower() in tags]
    body = (tagged or [body for _, body in blocks])[-1]
    return body if body.endswith("\n") else body + "\n"


def parse_unified_diff(reply: str) -> tuple[list[Block], list[str]]:
    """Hunks of a unified diff as SEARCH/REPLACE blocks (context and '-' lines -> SEARCH)."""
    fenced = [body for lang, body in _FENCE.findall(reply or "") if lang.lower() in ("diff", "patch", "udiff")]
    text = fenced[-1] if fenced else (reply or "")
    blocks: list[Block] = []
    cur: tuple[list[str], list[str]] | None = None

    def close() -> None:
        if cur is not None and (cur[0] or cur[1]):
            blocks.append(Block(len(blocks) + 1, "\n".join(cur[0]), "\n".join(cur[1])))

    for line in text.splitlines():
        if _HUNK.match(line):
            close()
            cur = ([], [])
        elif cur is None or line.startswith(("--- ", "+++ ", "diff ", "index ")):
            continue
        elif line.startswith("-"):
            cur[0].append(line[1:])
        elif line.startswith("+"):
            cur[1].append(line[1:])
        elif line.startswith("\\"):
            continue
        else:
            ctx = line[1:] if line.startswith(" ") else line
            cur[0].append(ctx)
            cur[1].append(ctx)
    close()
    if not blocks:
        return [], ["no @@ hunks found; answer with a unified diff (---/+++ headers, @@ hunks, ' '/-/+ lines)"]
    return blocks, []


# -- matching --------------------------------------------------------------------------------
def _norm(line: str) -> str:
    return " ".join(line.split())


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _line_starts(lines: list[str]) -> list[int]:
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line)
    starts.append(pos)
    return starts


Anchor = tuple[int, int] | None
"""(source line index, search line index) of the first matched non-blank line (re-indentation)."""


def _find(source: str, search: str) -> tuple[list[tuple[tuple[int, int], Anchor]], int]:
    """Candidate (span, anchor) pairs of search in source and the tolerance level used
    (0 exact, 1 trailing whitespace, 2 indentation, runs of spaces and blank lines)."""
    spans = [((m.start(), m.start() + len(search)), None) for m in re.finditer(re.escape(search), source)]
    if spans:
        return spans, 0
    src = source.splitlines(keepends=True)
    starts = _line_starts(src)
    pat = search.splitlines()
    while pat and not pat[0].strip():
        pat.pop(0)
    while pat and not pat[-1].strip():
        pat.pop()
    if not pat:
        return [], 0
    m = len(pat)
    found = [((starts[i], starts[i + m]), (i, 0)) for i in range(len(src) - m + 1)
             if all(src[i + k].rstrip() == pat[k].rstrip() for k in range(m))]
    if found:
        return found, 1
    body = [(i, _norm(line)) for i, line in enumerate(src) if line.strip()]
    want = [_norm(p) for p in pat if p.strip()]
    first_pat = next(k for k, p in enumerate(pat) if p.strip())
    hits = []
    for s in range(len(body) - len(want) + 1):
        if all(body[s + k][1] == want[k] for k in range(len(want))):
            a, b = body[s][0], body[s + len(want) - 1][0]
            hits.append(((starts[a], starts[b + 1]), (a, first_pat)))
    return hits, 2


def _reindent(replace: str, src_line: str, pat_line: str) -> str:
    have, want = _indent(pat_line), _indent(src_line)
    if have == want:
        return replace
    out = []
    for line in replace.split("\n"):
        if not line.strip():
            out.append(line)
        elif line.startswith(have):
            out.append(want + line[len(have):])
        else:
            out.append(want + line.lstrip())
    return "\n".join(out)


def _closest(source: str, search: str) -> str:
    src = source.splitlines()
    pat = [p for p in search.splitlines() if p.strip()]
    if not pat or not src:
        return ""
    target = "\n".join(_norm(p) for p in pat)
    best, where = 0.0, 0
    width = len(pat)
    for i in range(max(1, len(src) - width + 1)):
        cand = "\n".join(_norm(x) for x in src[i:i + width])
        sm = difflib.SequenceMatcher(None, cand, target, autojunk=False)
        if sm.quick_ratio() > best and sm.ratio() > best:
            best, where = sm.ratio(), i
    if best < 0.5:
        return ""
    shown = "\n".join(src[where:where + width])[:MAX_SHOWN]
    return f" The closest lines are {where + 1}-{where + width} ({best:.0%} similar):\n{shown}\n"


def _fit_replace(text: str, span: tuple[int, int], blk: Block, anchor: Anchor) -> str:
    """The REPLACE text as it goes into span: re-indented for tolerant matches, newline kept."""
    a, b = span
    replace = blk.replace
    if anchor is None:
        return replace
    pat = [p for p in blk.search.splitlines()]
    while pat and not pat[0].strip():
        pat.pop(0)
    replace = _reindent(replace, text.splitlines()[anchor[0]], pat[anchor[1]])
    if text[a:b].endswith("\n") and replace and not replace.endswith("\n"):
        replace += "\n"
    return replace


def _changed(text: str, span: tuple[int, int], replace: str) -> tuple[int, int]:
    """The part of span that the replacement really changes (unchanged context trimmed)."""
    a, b = span
    old = text[a:b]
    p = 0
    while p < min(len(old), len(replace)) and old[p] == replace[p]:
        p += 1
    q = 0
    while q < min(len(old), len(replace)) - p and old[len(old) - 1 - q] == replace[len(replace) - 1 - q]:
        q += 1
    return a + p, max(a + p, b - q)


def _contained(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in spans)


def _lines(source: str, span: tuple[int, int]) -> str:
    a, b = line_of(source, span[0]), line_of(source, max(span[0], span[1] - 1))
    return f"line {a}" if a == b else f"lines {a}-{b}"


def _region_desc(source: str, language: Lang = None) -> str:
    regs = find_regions(source, language)
    return ", ".join(f"lines {r.start_line}-{r.end_line}" for r in regs) or "the whole file"


def apply_blocks(source: str, blocks: list[Block], language: Lang = None) -> PatchResult:
    """Apply blocks in order, each to the result of the previous ones; every failure is reported."""
    res = PatchResult(text=None)
    text = source
    try:
        find_regions(source, language)
    except RegionError as exc:
        res.errors.append(f"the current program's EVOLVE-BLOCK markers are broken: {exc}")
        return res
    for blk in blocks:
        if _MARKER.search(blk.search) or _MARKER.search(blk.replace):
            if _MARKER.findall(blk.search) != _MARKER.findall(blk.replace):
                res.errors.append(f"block {blk.index}: must not add or remove EVOLVE-BLOCK markers; "
                                  "edit only the code between them")
                res.region_violations += 1
                continue
        if not blk.search.strip():
            res.errors.append(f"block {blk.index}: SEARCH is empty; copy the exact lines to change from the current program")
            continue
        found, level = _find(text, blk.search)
        if not found:
            res.errors.append(f"block {blk.index}: SEARCH text not found in the current program.{_closest(text, blk.search)}"
                              " Copy the lines to change exactly, including indentation.")
            continue
        allowed = editable_spans(text, language)
        cands = [(span, _fit_replace(text, span, blk, anchor)) for span, anchor in found]
        inside = [(s, r) for s, r in cands if _contained(_changed(text, s, r), allowed)]
        if not inside:
            res.region_violations += 1
            res.errors.append(f"block {blk.index}: SEARCH matches {_lines(text, found[0][0])}, outside the EVOLVE-BLOCK "
                              f"({_region_desc(text, language)}); only code between the markers may change")
            continue
        if len(inside) > 1:
            where = ", ".join(_lines(text, s) for s, _ in inside[:4])
            res.errors.append(f"block {blk.index}: SEARCH matches {len(inside)} places ({where}); "
                              "include more surrounding lines so it matches exactly one")
            continue
        (a, b), replace = inside[0]
        res.tolerant += level > 0
        text = text[:a] + replace + text[b:]
        res.applied += 1
    if res.errors:
        return res
    violation = check_outside(source, text, language)
    if violation:
        res.region_violations += 1
        res.errors.append(violation)
        return res
    res.text = text
    return res


def _norm_part(part: str) -> str:
    return "\n".join(line.rstrip() for line in part.strip("\n").splitlines())


def check_outside(parent: str, child: str, language: Lang = None) -> str | None:
    """None if child keeps the parent's markers and the code outside them; else the reason."""
    try:
        if not find_regions(parent, language):
            return None
        before, after = outside_text(parent, language), outside_text(child, language)
    except RegionError as exc:
        return f"EVOLVE-BLOCK markers broken: {exc}; keep every START/END marker line as it is"
    if len(before) != len(after):
        return (f"the program has {len(after) - 1} EVOLVE-BLOCK region(s) instead of {len(before) - 1}; "
                "keep the markers and edit only between them")
    for k, (x, y) in enumerate(zip(before, after)):
        if _norm_part(x) != _norm_part(y):
            xs, ys = _norm_part(x).splitlines(), _norm_part(y).splitlines()
            diff = next((i for i, (p, q) in enumerate(zip(xs, ys)) if p != q), min(len(xs), len(ys)))
            shown = xs[diff] if diff < len(xs) else "(end)"
            where = "before the first EVOLVE-BLOCK" if k == 0 else "after EVOLVE-BLOCK-END" if k == len(before) - 1 else "between EVOLVE-BLOCKs"
            return f"code {where} was changed (near {shown.strip()[:80]!r}); only code between the markers may change"
    return None


# -- whole replies ---------------------------------------------------------------------------
def apply_reply(parent: str, reply: str, fmt: str, language: Lang = None) -> PatchResult:
    """Parse a reply in the given format and apply it to parent (a program in language)."""
    if fmt == "full":
        code = extract_code(reply, language)
        if code is None:
            fence = resolve(language).fence
            return PatchResult(None, [f"no ```{fence} block found; answer with the complete program in one ```{fence} block"])
        violation = check_outside(parent, code, language)
        if violation:
            return PatchResult(None, [violation], region_violations=1)
        return PatchResult(code, applied=1)
    if fmt == "udiff":
        blocks, errors = parse_unified_diff(reply)
    elif fmt == "diff":
        blocks, errors = parse_search_replace(reply)
        if not blocks and not errors:
            errors = ["no SEARCH/REPLACE block found; answer with <<<<<<< SEARCH / ======= / >>>>>>> REPLACE blocks"]
    else:
        raise ValueError(f"unknown patch format {fmt!r}; use one of {', '.join(FORMATS)}")
    res = apply_blocks(parent, blocks, language) if blocks else PatchResult(None)
    res.errors = errors + res.errors
    if res.errors:
        res.text = None
    return res


def unified_diff(parent: str, child: str, a: str = "parent", b: str = "child", context: int = 2) -> str:
    return "".join(difflib.unified_diff(parent.splitlines(keepends=True), child.splitlines(keepends=True),
                                        fromfile=a, tofile=b, n=context))


__all__ = ["Block", "FORMATS", "PatchResult", "START", "END", "apply_blocks", "apply_reply", "check_outside",
           "extract_code", "parse_search_replace", "parse_unified_diff", "unified_diff"]
