"""Generic simulated behaviour: LoongFlow's planner and summarizer (engine/strategy/pes.py).

Recognised by content: the system message carries a marker line. The answers are deterministic
functions of the request (no randomness), so a simulated run stays reproducible:

- planner: picks a numeric constant of the solution to improve (by a hash of the text, skipping
  constants the lineage's summaries say to avoid) and a direction (the opposite of one a summary
  reports as worse), or, for a text without numbers, a structural step (a rule to add);
- summarizer: reads the score change and the size of the diff and states whether the plan's
  direction helped, so later plans continue it or avoid it.
"""

from __future__ import annotations

import re
import zlib

from engine.llm.sim.plugins import SimRequest

# Copies of engine/strategy/pes.py's PLANNER_MARKER / SUMMARIZER_MARKER: the simulator imports no
# strategy module, so keep the two in step by hand.
PLANNER_MARKER = "evotui-pes-planner:"
SUMMARIZER_MARKER = "evotui-pes-summarizer:"

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(#.*)?$", re.M)
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?\d+\.\d+(?:[eE][-+]?\d+)?")
_RESULT = re.compile(r"score\s+([-+\d.eE]+)\s*->\s*([-+\d.eE]+)\s*\((\w+)\)")
_WORSE_DIR = re.compile(r"(raising|lowering) (\w+) made it worse")


def recognises(req: SimRequest) -> bool:
    return PLANNER_MARKER in req.system or SUMMARIZER_MARKER in req.system


def answer(req: SimRequest) -> str:
    return _plan(req.user) if PLANNER_MARKER in req.system else _summary(req.user)


def _plan(user: str) -> str:
    m = _FENCE.search(user)
    code = m.group(1) if m else ""
    seed = zlib.crc32(code.encode())
    avoid = {name: direction for direction, name in _WORSE_DIR.findall(user)}
    names = [(name, value) for name, value, _ in _ASSIGN.findall(code)]
    if names:
        name, value = names[seed % len(names)]
        direction = "lower" if avoid.get(name) == "raising" else "raise" if avoid.get(name) == "lowering" \
            else ("raise" if seed & 1 else "lower")
        return (f"Reasoning: the lineage has not settled {name} yet.\nPLAN:\n"
                f"1. {direction.capitalize()} {name} (now {value}) by about 10%.\n"
                f"2. Keep every other constant and the structure unchanged, so the effect is attributable.")
    floats = _NUMBER.findall(code)
    if floats:
        value = floats[seed % len(floats)]
        return (f"Reasoning: the constant {value} drives the result.\nPLAN:\n"
                f"1. Tune the constant {value} in small steps, {'up' if seed & 1 else 'down'} first.\n"
                "2. Leave the rest of the structure as it is.")
    return ("Reasoning: the text states no explicit rules for the cases it misses.\nPLAN:\n"
            "1. Add one explicit rule for the most frequent failure in the feedback.\n"
            "2. Keep the existing rules and their order.")


def _summary(user: str) -> str:
    m = _RESULT.search(user)
    verdict = m.group(3) if m else "unknown"
    changed = sum(1 for ln in user.splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")))
    plan = re.search(r"(Raise|Lower) (\w+)", user)
    step = f"{'raising' if plan and plan.group(1) == 'Raise' else 'lowering'} {plan.group(2)}" if plan else "this change"
    if verdict == "improved":
        return (f"SUMMARY: {step} improved the score ({m.group(1)} -> {m.group(2)}) with {changed} changed lines; "
                "continue in this direction with a similar step.")
    if verdict == "worse":
        return (f"SUMMARY: {step} made it worse ({m.group(1)} -> {m.group(2)}); the opposite direction or "
                "another constant should be tried next.")
    return f"SUMMARY: {step} left the score unchanged ({changed} changed lines); try a larger or different step."
