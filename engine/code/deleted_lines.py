"""Line normalisation and the deleted-line memory shared by the offline cycling detector
(engine/trace/analyze/cycling.py) and the live guard (engine/code/cycling.py), so both count a
recycled line the same way.

Lines are normalised (outer whitespace stripped, inner runs of whitespace collapsed) and only
those of MIN_LEN or more characters count. An added line that the lineage deleted earlier is
- literal: byte-identical (after stripping the line end and outer whitespace) to a deleted line;
- trivial: a comment-only line, or equal to a deleted line up to whitespace;
- tuning: the same skeleton (numbers replaced by N) as a deleted line, other numbers.
"""

from __future__ import annotations

import difflib
import re

MIN_LEN = 5
CLASSES = ("literal", "tuning", "trivial")
_NUM = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"\s+")
_COMMENT = ("#", "//", "/*", "*", "--")


def normalise(line: str) -> str:
    return _WS.sub(" ", line.strip())


def skeleton(line: str) -> str:
    return _NUM.sub("N", normalise(line))


def counts(line: str) -> bool:
    """Whether a line is long enough to be counted at all."""
    return len(normalise(line)) >= MIN_LEN


class Memory:
    """What a lineage deleted so far: exact lines, normalised lines, skeletons (immutable)."""

    def __init__(self, exact: frozenset[str] = frozenset(), norm: frozenset[str] = frozenset(),
                 skel: frozenset[str] = frozenset()) -> None:
        self.exact, self.norm, self.skel = exact, norm, skel

    def plus(self, removed: list[str]) -> Memory:
        kept = [ln for ln in removed if counts(ln)]
        if not kept:
            return self
        return Memory(self.exact | {ln.strip() for ln in kept}, self.norm | {normalise(ln) for ln in kept},
                      self.skel | {skeleton(ln) for ln in kept})

    def classify(self, line: str) -> str | None:
        """The recycling class of an added line (one of CLASSES), or None when it is new."""
        norm = normalise(line)
        if len(norm) < MIN_LEN:
            return None
        comment = norm.startswith(_COMMENT)
        if line.strip() in self.exact:
            return "trivial" if comment else "literal"
        if norm in self.norm:
            return "trivial"
        if not comment and skeleton(line) in self.skel and _NUM.search(norm):
            return "tuning"
        return None


def line_changes(parent: str, child: str) -> tuple[list[str], list[str]]:
    """(added, removed) lines of the parent -> child diff."""
    added, removed = [], []
    a, b = parent.splitlines(), child.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            removed += a[i1:i2]
        if tag in ("insert", "replace"):
            added += b[j1:j2]
    return added, removed
