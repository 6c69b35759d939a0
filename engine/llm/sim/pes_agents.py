"""Generic simulated behaviour: LoongFlow's planner and summarizer (engine/strategy/pes.py).

Recognised by content: the system message carries a marker line. The answers are functions of
the request and, for an unsettled plan, of the request's seeded random stream (so siblings of
one parent get different plans, as from a sampled model, and a run stays reproducible):

- planner: continues the trajectory the newest summary in the lineage reports (directions.py:
  "raising r improved" -> raise r again; "... made it worse" -> the opposite direction), else,
  like a model sampling at a temperature, draws a named constant of the solution and a direction
  (the opposite of a direction a summary reports as worse) from the request's random stream, or
  a float literal ("Raise the constant 0.35"), or,
  for a text without numbers, a structural step (a rule to add). Its steps are directives the
  simulated proposer may follow (program_model.py, P_FOLLOW).
- summarizer: reads the score change and what the diff actually moved (directions.moves, which
  may differ from the plan when the proposer did not follow it) and states whether that
  direction helped, so later plans continue it or avoid it.
"""

from __future__ import annotations

import random
import re

from engine.llm.sim import directions
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
_SUMMARY_LINE = re.compile(r"^\s*summary: (raising|lowering) (\w+) (improved|made it worse)", re.M)


def recognises(req: SimRequest) -> bool:
    return PLANNER_MARKER in req.system or SUMMARIZER_MARKER in req.system


def answer(req: SimRequest, rng: random.Random) -> str:
    return _plan(req.user, rng) if PLANNER_MARKER in req.system else _summary(req.user)


def _plan(user: str, rng: random.Random) -> str:
    m = _FENCE.search(user)
    code = m.group(1) if m else ""
    names = [(name, value) for name, value, _ in _ASSIGN.findall(code)]
    known = dict(names)
    latest = _SUMMARY_LINE.findall(user)
    if latest and latest[-1][1] in known:  # the newest verdict on a named constant: continue or turn
        verb, name, verdict = latest[-1]
        up = (verb == "raising") == (verdict == "improved")
        return (f"Reasoning: the last generation's summary says {verb} {name} {verdict}.\nPLAN:\n"
                f"1. {'Raise' if up else 'Lower'} {name} (now {known[name]}) by about 10%.\n"
                f"2. Keep every other constant and the structure unchanged, so the effect is attributable.")
    avoid = {name: direction for direction, name in _WORSE_DIR.findall(user)}
    if names:
        name, value = rng.choice(names)
        direction = "lower" if avoid.get(name) == "raising" else "raise" if avoid.get(name) == "lowering" \
            else rng.choice(("raise", "lower"))
        return (f"Reasoning: the lineage has not settled {name} yet.\nPLAN:\n"
                f"1. {direction.capitalize()} {name} (now {value}) by about 10%.\n"
                f"2. Keep every other constant and the structure unchanged, so the effect is attributable.")
    floats = _NUMBER.findall(code)
    if floats:
        value = rng.choice(floats)
        return (f"Reasoning: the constant {value} drives the result.\nPLAN:\n"
                f"1. {rng.choice(('Raise', 'Lower'))} the constant {value} in small steps.\n"
                "2. Leave the rest of the structure as it is.")
    return ("Reasoning: the text states no explicit rules for the cases it misses.\nPLAN:\n"
            "1. Add one explicit rule for the most frequent failure in the feedback.\n"
            "2. Keep the existing rules and their order.")


def _summary(user: str) -> str:
    m = _RESULT.search(user)
    verdict = m.group(3) if m else "unknown"
    changed = sum(1 for ln in user.splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")))
    moved = directions.moves(user)
    plan = re.search(r"(Raise|Lower) (?:the constant )?([\w.]+)", user)
    if len(moved) == 1:  # what the diff did, whatever the plan said
        step = f"{'raising' if moved[0].up else 'lowering'} {moved[0].name}"
    elif plan and not moved:
        step = f"{'raising' if plan.group(1) == 'Raise' else 'lowering'} {plan.group(2)}"
    else:
        step = "this change"
    if verdict == "improved":
        return (f"SUMMARY: {step} improved the score ({m.group(1)} -> {m.group(2)}) with {changed} changed lines; "
                "continue in this direction with a similar step.")
    if verdict == "worse":
        return (f"SUMMARY: {step} made it worse ({m.group(1)} -> {m.group(2)}); the opposite direction or "
                "another constant should be tried next.")
    return f"SUMMARY: {step} left the score unchanged ({changed} changed lines); try a larger or different step."
