"""Generic simulated behaviour: the repair of a stale note (engine/strategy/revise.py).

Recognised by the marker line `evotui-note-reviser:` in the system message; answered
deterministically from the request alone. The reviser weighs the pool changes listed since the
note was made: each change whose text reports a move (directions.reported: "raises r",
"lowering k ...") counts for that move when its delta is positive and against it when negative.
A direction the note gives (directions.directives) that the changes count against, or whose
opposite they count for, is turned round; a direction the changes count for that the note does
not mention is added as one line. Nothing to change: `KEEP`. Otherwise `REVISED:` and the note.
"""

from __future__ import annotations

import re

from engine.llm.sim import directions
from engine.llm.sim.plugins import SimRequest

MARKER = "evotui-note-reviser:"
_NOTE = re.compile(r"^## The \w+ \(made at pool version [^\n]*\n(.*?)\n\n## Changes since", re.S | re.M)
_CHANGE = re.compile(r"^- \S+.*?delta ([-+]?[\d.eE+-]+)\)?;?(.*)$", re.M)
_WORD = re.compile(r"[A-Za-z_]\w*|\d+\.\d+|\d+")
_VERB = r"\b(raise|increase|lower|decrease|reduce)(\s+(?:the\s+)?(?:constant\s+)?`?{name})\b"


def recognises(req: SimRequest) -> bool:
    return MARKER in req.system


def _evidence(user: str) -> dict[tuple[str, bool], int]:
    net: dict[tuple[str, bool], int] = {}
    for delta, text in _CHANGE.findall(user):
        try:
            d = float(delta)
        except ValueError:
            continue
        if d == 0:
            continue
        for move in directions.reported(text):
            net[move] = net.get(move, 0) + (1 if d > 0 else -1)
    return net


def _turned(note: str, name: str, up: bool) -> str:
    def swap(m: re.Match) -> str:
        word = "lower" if up else "raise"
        return (word.capitalize() if m.group(1)[0].isupper() else word) + m.group(2)

    return re.sub(_VERB.format(name=re.escape(name)), swap, note, flags=re.I)


def answer(req: SimRequest) -> str:
    m = _NOTE.search(req.user)
    note = m.group(1).strip() if m else ""
    net = _evidence(req.user)
    given = directions.directives(note, set(_WORD.findall(note)))
    revised = note
    for name, up in given:
        if net.get((name, up), 0) < 0 or net.get((name, not up), 0) > 0:
            revised = _turned(revised, name, up)
    mentioned = {name for name, _ in given}
    new = sorted(f"{'raise' if up else 'lower'} {name}" for (name, up), n in net.items()
                 if n > 0 and name not in mentioned)
    if new:
        revised += f"\nSince then these directions helped: {'; '.join(new[:3])}."
    if revised == note:
        return "KEEP"
    return f"REVISED:\n{revised}"
