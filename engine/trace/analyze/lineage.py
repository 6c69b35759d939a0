"""Lineage statistics: depth of the best's lineage, dead-branch share, best-so-far timeline,
proposals and time to best, and the jackpot-then-flat flag (paper §5.1)."""

from __future__ import annotations

from typing import Any

from engine.trace.model import Trace

# Jackpot-then-flat: the best came in the first half of the proposals and one best-so-far step
# made at least half of the whole gain over the seed (most of the budget then went nowhere).
JACKPOT_BY = 0.5
JACKPOT_SHARE = 0.5


def proposals(trace: Trace) -> list[dict[str, Any]]:
    """Every candidate but the seed, in the order it was made."""
    return sorted((c for c in trace.candidates if c["parent_ids"]), key=lambda c: (c["created_at"], c["candidate_id"]))


def best_of(trace: Trace) -> dict[str, Any] | None:
    scored = [a for a in trace.artifacts() if a["val_mean"] is not None]
    return max(scored, key=lambda a: (a["val_mean"], -a["created_at"])) if scored else None


def ancestors(trace: Trace, cid: str) -> set[str]:
    by_id = trace.by_id()
    seen, todo = set(), [cid]
    while todo:
        cur = todo.pop()
        if cur in seen or cur not in by_id:
            continue
        seen.add(cur)
        todo += by_id[cur]["parent_ids"]
    return seen


def depth(trace: Trace, cid: str) -> int:
    """Edges from cid back to the seed along first parents."""
    by_id, n, cur = trace.by_id(), 0, cid
    while cur in by_id and by_id[cur]["parent_ids"] and n <= len(by_id):
        cur, n = by_id[cur]["parent_ids"][0], n + 1
    return n


def analyze(trace: Trace) -> dict[str, Any]:
    best = best_of(trace)
    seed = next((a for a in trace.artifacts() if not a["parent_ids"]), None)
    made = proposals(trace)
    if best is None or seed is None:
        return {"proposals": len(made), "best_id": None}
    line = ancestors(trace, best["candidate_id"])
    timeline, top = [], seed["val_mean"] if seed["val_mean"] is not None else float("-inf")
    timeline.append({"proposal": 0, "candidate_id": seed["candidate_id"], "score": seed["val_mean"]})
    for i, c in enumerate(made, 1):
        if c["kind"] == "artifact" and c["val_mean"] is not None and c["val_mean"] > top:
            top = c["val_mean"]
            timeline.append({"proposal": i, "candidate_id": c["candidate_id"], "score": top,
                             "t_s": round(c["created_at"] - trace.run["created_at"], 3)})
    to_best = next((i for i, c in enumerate(made, 1) if c["candidate_id"] == best["candidate_id"]), 0)
    gain = (best["val_mean"] or 0.0) - (seed["val_mean"] or 0.0)
    jumps = [b["score"] - a["score"] for a, b in zip(timeline, timeline[1:])]
    biggest = max(jumps, default=0.0)
    jackpot = bool(made) and gain > 0 and to_best <= JACKPOT_BY * len(made) and biggest >= JACKPOT_SHARE * gain
    dead = [c for c in made if c["candidate_id"] not in line]
    return {
        "proposals": len(made),
        "seed_id": seed["candidate_id"], "seed_score": seed["val_mean"],
        "best_id": best["candidate_id"], "best_score": best["val_mean"],
        "best_depth": depth(trace, best["candidate_id"]),
        "best_lineage_size": len(line),
        "dead_branch_share": round(len(dead) / len(made), 4) if made else 0.0,
        "proposals_to_best": to_best,
        "time_to_best_s": round(best["created_at"] - trace.run["created_at"], 3),
        "timeline": timeline,
        "largest_jump_share": round(biggest / gain, 4) if gain > 0 else 0.0,
        "jackpot_then_flat": jackpot,
    }
