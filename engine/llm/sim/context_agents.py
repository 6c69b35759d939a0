"""Generic simulated behaviour: ContextEvolve's three agents (engine/strategy/context_agents.py).

Recognised by the marker line of their system messages and answered deterministically (no
randomness), derived from the request alone:

- Summarizer: "NEW:" what the diff in the request does (the named constants it moves and which
  way, directions.moves; else functions added or removed, lines added/removed), "PRESERVES:" the
  first clause of the parent summary given.
- Navigator: counts the improvement / mixed / decline / failed transitions; from the moves the
  transitions' summaries report (directions.reported) it names the directions that improved more
  often than they declined ("raise r") and those that declined more often ("avoid lowering k"),
  abstractly, without code; it names the newest failure's reason when some failed. Guidance
  with a direction is what the simulated proposer may follow (program_model.py, P_FOLLOW); when
  the transitions report no direction, the guidance names the kinds of change as before.
- Sampler: ids that appear in the candidate list: the best scorers, then the lowest scorer.
"""

from __future__ import annotations

import re

from engine.llm.sim import directions
from engine.llm.sim.edit_judge import changed_lines
from engine.llm.sim.plugins import SimRequest

SUMMARIZER_MARKER = "evotui-context-summarizer:"
NAVIGATOR_MARKER = "evotui-context-navigator:"
SAMPLER_MARKER = "evotui-context-sampler:"

_NUM = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_DEF = re.compile(r"^\s*(?:def|class)\s+(\w+)")
_PARENT = re.compile(r"## Parent summary\n(.*?)\n\n##", re.S)
_TRANSITION = re.compile(r"^- \[(improvement|mixed|decline)\] \S+ -> \S+: .*\(delta ([-+]?[\d.eE+-]+)\)\n"
                         r"  before: .*\n  after: (.*)$", re.M)
_FAILED = re.compile(r"^- \[failed\] \S+ -> \S+: score \S+ -> not scored \((.*)\)$", re.M)
_CANDIDATE = re.compile(r"^- (\S+) \| score ([-+]?[\d.eE+-]+|nan|inf) \|", re.M)
_PICK = re.compile(r"Pick up to (\d+)")


def recognises(req: SimRequest) -> bool:
    return any(m in req.system for m in (SUMMARIZER_MARKER, NAVIGATOR_MARKER, SAMPLER_MARKER))


def answer(req: SimRequest) -> str:
    if SUMMARIZER_MARKER in req.system:
        return _summary(req.user)
    if NAVIGATOR_MARKER in req.system:
        return _guidance(req.user)
    return _exemplars(req.user)


def _new_clause(text: str) -> str:
    m = re.search(r"NEW:\s*(.*)", text)
    first = (m.group(1) if m else text).strip()
    return first.split(". ")[0].rstrip(".")[:160]


def _summary(user: str) -> str:
    added, removed = changed_lines(user)
    new_defs = sorted({m.group(1) for ln in added if (m := _DEF.match(ln))} - {m.group(1) for ln in removed if (m := _DEF.match(ln))})
    gone = sorted({m.group(1) for ln in removed if (m := _DEF.match(ln))} - {m.group(1) for ln in added if (m := _DEF.match(ln))})
    strip = lambda lines: [_NUM.sub("#", ln).strip() for ln in lines]  # noqa: E731
    moved = directions.moves(user)
    if moved:
        new = ", ".join(m.describe() for m in moved[:3])
    elif new_defs:
        new = f"adds {', '.join(new_defs[:3])}"
    elif gone:
        new = f"removes {', '.join(gone[:3])}"
    elif added and strip(added) == strip(removed):
        nums = [n for ln in added for n in _NUM.findall(ln)][:3]
        new = f"retunes constants (now {', '.join(nums)})" if nums else "rewords lines"
    elif added or removed:
        new = f"reworks {len(added)} lines and drops {len(removed)}"
    else:
        new = "changes nothing visible"
    m = _PARENT.search(user + "\n\n##")
    parent = m.group(1).strip() if m else ""
    kept = _new_clause(parent) if parent and not parent.startswith("(none") else "the initial construction"
    return f"NEW: {new}.\nPRESERVES: {kept}."


def _directions(found: list[tuple[str, float, str]]) -> tuple[list[str], list[str]]:
    """Directions reported by improvements more often than by declines, and the reverse."""
    net: dict[tuple[str, bool], int] = {}
    for cat, _, after in found:
        if cat in ("improvement", "decline"):
            for move in directions.reported(after):
                net[move] = net.get(move, 0) + (1 if cat == "improvement" else -1)
    helped = [f"{'raise' if up else 'lower'} {name}" for (name, up), n in sorted(net.items()) if n > 0]
    hurt = [f"{'raising' if up else 'lowering'} {name}" for (name, up), n in sorted(net.items()) if n < 0]
    return helped, hurt


def _guidance(user: str) -> str:
    found = [(cat, float(delta), after) for cat, delta, after in _TRANSITION.findall(user)]
    failed = _FAILED.findall(user)
    counts = {c: sum(1 for f in found if f[0] == c) for c in ("improvement", "mixed", "decline")}
    lines = [f"Of {len(found) + len(failed)} recent changes, {counts['improvement']} improved, {counts['mixed']} were "
             f"mixed, {counts['decline']} declined and {len(failed)} failed before scoring."]
    ups = [f for f in found if f[0] == "improvement"]
    downs = [f for f in found if f[0] == "decline"]
    helped, hurt = _directions(found)
    if helped:
        lines.append(f"Directions that helped: {'; '.join(helped[:3])}. Keep moving that way in small steps.")
    elif ups:
        lines.append(f"Changes in the spirit of \"{_new_clause(max(ups, key=lambda f: f[1])[2])}\" helped: "
                     "push further in that direction.")
    if hurt:
        lines.append(f"Avoid {', '.join(hurt[:3])}: that region scored worse.")
    elif downs:
        lines.append(f"Changes like \"{_new_clause(min(downs, key=lambda f: f[1])[2])}\" hurt: avoid that region.")
    if failed:
        lines.append(f"Recent failures ({short_reason(failed[-1])}): keep edits small and well-formed.")
    if not ups:
        lines.append("Nothing has helped yet: try a structurally different idea rather than small tweaks.")
    return "\n".join(lines)


def short_reason(reason: str) -> str:
    return reason.split(":")[0].strip()[:60] or "unknown"


def _exemplars(user: str) -> str:
    scored = []
    for aid, score in _CANDIDATE.findall(user):
        try:
            scored.append((float(score), aid))
        except ValueError:
            continue
    m = _PICK.search(user)
    k = int(m.group(1)) if m else 3
    if not scored or k <= 0:
        return "EXEMPLARS: none"
    best = [aid for _, aid in sorted(scored, key=lambda s: (-s[0], s[1]))]
    picks = best[: max(1, k - 1)]
    low = min(scored)[1]
    if low not in picks:
        picks.append(low)
    return "EXEMPLARS: " + ", ".join(picks[:k])
