"""Cycling (paper §5.2, B.6): lines a child adds that its own lineage deleted before.

Lines are normalised (outer whitespace stripped, inner runs of whitespace collapsed) and only
those of 5 or more characters count. An added line that the lineage deleted earlier is
- literal: byte-identical (after stripping the line end and outer whitespace) to a deleted line;
- trivial: a comment-only line, or equal to a deleted line up to whitespace;
- tuning: the same skeleton (numbers replaced by N) as a deleted line, other numbers.
The lineage of a candidate is its chain of first parents; a deletion is remembered by every
descendant of the child that made it.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from typing import Any

from engine.trace.model import Trace

MIN_LEN = 5
_NUM = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WS = re.compile(r"\s+")
_COMMENT = ("#", "//", "/*", "*", "--")


def normalise(line: str) -> str:
    return _WS.sub(" ", line.strip())


def skeleton(line: str) -> str:
    return _NUM.sub("N", normalise(line))


class Memory:
    """What a lineage deleted so far: exact lines, normalised lines, skeletons."""

    def __init__(self, exact: frozenset[str] = frozenset(), norm: frozenset[str] = frozenset(),
                 skel: frozenset[str] = frozenset()) -> None:
        self.exact, self.norm, self.skel = exact, norm, skel

    def plus(self, removed: list[str]) -> Memory:
        kept = [ln for ln in removed if len(normalise(ln)) >= MIN_LEN]
        return Memory(self.exact | {ln.strip() for ln in kept}, self.norm | {normalise(ln) for ln in kept},
                      self.skel | {skeleton(ln) for ln in kept})

    def classify(self, line: str) -> str | None:
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


def analyze(trace: Trace, top: int = 10) -> dict[str, Any]:
    by_id = trace.by_id()
    order = sorted((c for c in trace.candidates if c["source"] is not None),
                   key=lambda c: (c["iteration"], c["created_at"], c["candidate_id"]))
    memory: dict[str, Memory] = {}
    gen: dict[str, int] = {}
    edits, cycled = [], Counter()
    totals = Counter()
    for c in order:
        parents = [p for p in c["parent_ids"] if p in by_id and by_id[p]["source"] is not None]
        if not parents:
            memory[c["candidate_id"]], gen[c["candidate_id"]] = Memory(), 0
            continue
        parent = by_id[parents[0]]
        mem = memory.get(parent["candidate_id"], Memory())
        added, removed = line_changes(parent["source"], c["source"])
        counts = Counter()
        eligible = 0
        for line in added:
            if len(normalise(line)) < MIN_LEN:
                continue
            eligible += 1
            kind = mem.classify(line)
            if kind:
                counts[kind] += 1
                cycled[(normalise(line), kind)] += 1
        memory[c["candidate_id"]] = mem.plus(removed)
        gen[c["candidate_id"]] = gen.get(parent["candidate_id"], 0) + 1
        recycled = sum(counts.values())
        totals.update(counts)
        totals["added"] += eligible
        edits.append({"child_id": c["candidate_id"], "parent_id": parent["candidate_id"],
                      "generation": gen[c["candidate_id"]], "added": eligible, "recycled": recycled,
                      **{k: counts[k] for k in ("literal", "tuning", "trivial")}})
    per_gen: dict[int, list[int]] = {}
    for e in edits:
        acc = per_gen.setdefault(e["generation"], [0, 0])
        acc[0] += e["recycled"]
        acc[1] += e["added"]
    recycled_total = sum(totals[k] for k in ("literal", "tuning", "trivial"))
    return {
        "edits": len(edits),
        "added_lines": totals["added"],
        "recycled_lines": recycled_total,
        "recycle_rate": round(recycled_total / totals["added"], 4) if totals["added"] else 0.0,
        "by_class": {k: totals[k] for k in ("literal", "tuning", "trivial")},
        "per_generation": [{"generation": g, "recycled": r, "added": n, "rate": round(r / n, 4) if n else 0.0}
                           for g, (r, n) in sorted(per_gen.items())],
        "top_lines": [{"line": line, "class": kind, "count": n} for (line, kind), n in cycled.most_common(top)],
        "per_edit": edits,
    }
