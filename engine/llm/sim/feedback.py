"""Where a reflection request states its feedback, in whichever layout it uses.

Two layouts carry the same information: ``Feedback:`` lines (evotui's reflection prompt, and
many hand-written ones) and a ``Feedback`` markdown heading over a section of text (GEPA's
default reflection template renders each example as ``# Example n`` / ``## Inputs`` /
``## Generated Outputs`` / ``## Feedback``). Reflectors read feedback through this module so a
layout changes only where the text is found, never what is inferred from it.
"""

from __future__ import annotations

import re

FEEDBACK_LINE = re.compile(r"^[ \t>*#-]*Feedback:[ \t]*(.*)$", re.M | re.I)
"""A ``Feedback: ...`` line (the text after the colon is group 1)."""
FEEDBACK_HEADING = re.compile(r"^(#{1,6})[ \t]*Feedback[ \t]*$", re.M | re.I)
"""A markdown heading ``## Feedback`` whose section (up to the next heading of the same or a
higher level, or a fence) is the feedback."""
_HEADING = re.compile(r"^(#{1,6})[ \t]+\S")


def _section(text: str, start: int, level: int) -> str:
    """The text under a heading, from ``start`` to the next heading at ``level`` or above."""
    kept: list[str] = []
    for line in text[start:].splitlines():
        m = _HEADING.match(line)
        if line.lstrip().startswith("```") or (m and len(m.group(1)) <= level):
            break
        if not m:  # sub-headings (feedback given as a dict) are labels, not feedback
            kept.append(line.strip())
    return " ".join(ln for ln in kept if ln)


def feedback_texts(text: str, start: int = 0) -> list[str]:
    """The feedback items in ``text`` after ``start``: ``Feedback:`` lines if there are any
    (evotui's layout, read exactly as before), else the sections under ``Feedback`` headings."""
    lines = [m.group(1) for m in FEEDBACK_LINE.finditer(text, start)]
    if lines:
        return lines
    return [_section(text, m.end(), len(m.group(1))) for m in FEEDBACK_HEADING.finditer(text, start)]


def has_feedback(text: str, start: int = 0) -> bool:
    """Whether ``text`` states feedback after ``start`` in either layout."""
    return FEEDBACK_LINE.search(text, start) is not None or FEEDBACK_HEADING.search(text, start) is not None
