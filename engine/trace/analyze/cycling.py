"""Cycling (paper §5.2, B.6): lines a child adds that its own lineage deleted before.

Normalisation and the literal / tuning / trivial classes are engine/code/deleted_lines.py (the
live guard, engine/code/cycling.py, counts with the same code). The lineage of a candidate is its
chain of first parents; a deletion is remembered by every descendant of the child that made it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.code.deleted_lines import MIN_LEN, Memory, line_changes, normalise, skeleton
from engine.trace.model import Trace

__all__ = ["MIN_LEN", "Memory", "analyze", "line_changes", "normalise", "skeleton"]


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
