"""Generic simulated behaviour: the knob-ranking request of `evotui tune` (engine/trace/tune_rank.py).

Recognised by content: the system message carries the marker line ``evotui-knob-ranking:``. The
user message lists candidate knobs one per line as ``- NAME = LITERAL  (line L: CODE)``. The
answer picks at most 8 of them, deterministically from the request (no randomness): knobs whose
name is a word (an assigned constant) before the anonymous ``k_line...`` ones, floats before
integers, source order otherwise, each with an interval (log x/3..3x for a positive float,
linear -0.1..0.1 for zero, x/3..3x for an integer). The reply's format depends on a hash of the
request, the way models differ: a JSON object ``{"hparams": [...]}``, a bare JSON list in a
fenced block, or a numbered plain-text list (``1. name: low .. high (log)``), so the parser of
`evotui tune` is exercised on every reasonable layout.
"""

from __future__ import annotations

import hashlib
import json
import re

from engine.llm.sim.plugins import SimRequest

MARKER = "evotui-knob-ranking:"
_LINE = re.compile(r"^\s*-\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<lit>[-+]?[0-9][0-9_.eE+-]*)")
MAX = 8


def recognises(req: SimRequest) -> bool:
    return MARKER in req.system


def _interval(value: float, is_int: bool) -> tuple[float, float, str]:
    if is_int:
        return float(max(1, int(value) // 3)), float(int(value) * 3), "linear"
    if value == 0:
        return -0.1, 0.1, "linear"
    return value / 3, value * 3, "log"


def picks(user: str) -> list[dict]:
    rows = []
    for n, line in enumerate(user.splitlines()):
        m = _LINE.match(line)
        if not m:
            continue
        lit = m.group("lit").replace("_", "")
        try:
            value = float(lit)
        except ValueError:
            continue
        is_int = re.fullmatch(r"[-+]?[0-9]+", lit) is not None
        lo, hi, scale = _interval(value, is_int)
        rows.append((m.group("name").startswith("k_line"), is_int, n,
                     {"name": m.group("name"), "source_literal": m.group("lit"), "default": value, "low": lo,
                      "high": hi, "scale": scale, "kind": "int" if is_int else "float"}))
    rows.sort(key=lambda r: r[:3])
    return [r[3] for r in rows[:MAX]]


def answer(req: SimRequest) -> str:
    chosen = picks(req.user)
    style = hashlib.sha256(req.user.encode("utf-8")).digest()[0] % 3
    if style == 0:
        return json.dumps({"hparams": chosen}, indent=1)
    if style == 1:
        return "Here are the knobs I would tune:\n```json\n" + json.dumps(chosen) + "\n```"
    lines = [f"{i}. {k['name']}: {k['low']:g} .. {k['high']:g} ({k['scale']})" for i, k in enumerate(chosen, 1)]
    return "Ranked knobs, most promising first:\n" + "\n".join(lines)
