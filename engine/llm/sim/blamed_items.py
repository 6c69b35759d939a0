"""Which lines of a program the request's feedback blames: the simulated model fixes what is reported.

An evaluator that names the items limiting the score ("smallest triangle is points (4, 8, 10)",
"circles 3 and 7 overlap", "circle 12 sticks out") tells a reader where to look. When the program
holds its items as a table (consecutive editable lines equal up to their numbers, one item per
line, e.g. a list of coordinates), item k is the table's line k, and a model that reads the
feedback edits one of those lines (program_model.P_BLAME) instead of any literal of the program.

This is what makes improvements on such tasks cumulative, as with a real LLM: the feedback names
the current bottleneck, so once an edit fixes it the next request names the next one; a proposal
from the seed alone only ever sees the seed's first bottleneck. (Evaluator feedback in the prompt
is how AlphaEvolve and OpenEvolve let the model target the weak part; Self-Refine, Madaan et
al. 2023, and Reflexion, Shinn et al. 2023, report that models revise what the feedback points at.)

Deterministic, knows no task: it reads the prose outside code fences and the program's layout.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"```.*?(```|\Z)", re.S)
_NUM = re.compile(r"(?<![\w.])(\d+\.\d*|\d*\.\d+|\d+)(?![\w.])")  # program_model's literal
_NAMED = re.compile(r"\b(?:points?|circles?|items?|elements?|entries|entry|rows?|nodes?|vertices|vertex)"
                    r"\s*\(?\s*(\d+(?:\s*(?:,|and|&)\s*\d+)*)", re.I)


def blamed_indices(request: str) -> list[int]:
    """Item indices the prose names after an item noun, in order, no repeats."""
    prose = _FENCE.sub("", request)
    out: list[int] = []
    for m in _NAMED.finditer(prose):
        for tok in re.findall(r"\d+", m.group(1)):
            if int(tok) not in out:
                out.append(int(tok))
    return out


def item_table(lines: list[str], rows: list[int], comment: str) -> list[int]:
    """The line indices of the program's longest table among the editable ``rows``: consecutive
    lines equal up to their numbers, each with a number (at least two lines; else empty)."""
    def skeleton(i: int) -> str | None:
        code = lines[i].split(comment)[0]
        return _NUM.sub("#", code.strip()) if _NUM.search(code) else None

    best: list[int] = []
    run: list[int] = []
    for i in rows:
        if run and i == run[-1] + 1 and skeleton(i) is not None and skeleton(i) == skeleton(run[-1]):
            run.append(i)
        else:
            run = [i] if skeleton(i) is not None else []
        if len(run) > len(best):
            best = list(run)
    return best if len(best) >= 2 else []


def blamed_rows(lines: list[str], rows: list[int], comment: str, request: str) -> list[int]:
    """Line indices of the table items the request's feedback names (empty when it names none
    or the program has no table long enough for them)."""
    table = item_table(lines, rows, comment)
    if not table:
        return []
    return [table[k] for k in blamed_indices(request) if k < len(table)]
