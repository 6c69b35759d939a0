"""The agent-tools task's simulated answers to the two TextGrad calls (engine/stages/textgrad.py).

Recognised by content only (engine/llm/sim/plugins.py): a propose request whose system message
carries a textgrad marker line and whose component heading names one of the agent's parts.

Gradient (critique): reads the feedback of the request's examples (the aspects each failure
names, engine/tasks/agentworld.py). For a failing check the critiqued component owns and does not
state yet, it names the cause (CAUSE) with P_DIAGNOSE, else it writes a vague point that names
nothing. A check the component already states gets "the assistant did not follow it", one
another component owns gets "not caused by this component". Never a rewrite.

Apply (step): sees only the component and the critique, so it can fix only what the critique
names: each CAUSE phrase in the critique is fixed with P_APPLY (the agent-tools reflector's fix
texts, engine/tasks/agentworld_sim.py; the code fix rounds to one place with P_WRONG_PLACES).
A critique that names no cause gets a generic line (a wasted step, as with a real model).
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine.llm.sim.feedback import feedback_texts
from engine.llm.sim.plugins import SimRequest
from engine.stages.textgrad import APPLY_MARKER, GRADIENT_MARKER
from engine.tasks.agentworld import ASPECT_OWNER, aspects_in_feedback
from engine.tasks.agentworld_sim import FIX_CODE, FIX_TEXT, P_WRONG_PLACES, stated

P_DIAGNOSE = 0.8
"""The critique names the real cause of a failing check the component owns (else a vague point)."""
P_APPLY = 0.9
"""The step carries out a cause the critique names (else it leaves that point out)."""

CAUSE = {
    "format": "it never asks for the answer as a `TOTAL: <amount> <CUR>` line",
    "quantity": "it never says to multiply the unit price by the quantity ordered",
    "cents": "it never says that lookup returns prices in cents",
    "direction": "it never says that convert converts from USD into the target currency",
    "rounding": "its code does not round totals to 2 decimal places",
}
"""What the critique says caused a failed check (the step recognises these phrases)."""
VAGUE_POINT = "- The text could be clearer; some answers still went wrong."
_GENERIC = ("Follow the steps carefully.", "Double-check each step before answering.")
_AGENT_PARTS = set(ASPECT_OWNER.values())
_TARGET = re.compile(r"^## Current instructions: component \[([A-Za-z0-9_.-]+)\]\s*\n```[^\n]*\n(.*?)```", re.S | re.M)
_ORDER_LINE = re.compile(r"^Order: \d+ x [a-z]+\s*$", re.M)


def _target(user: str) -> tuple[str, str, int] | None:
    m = _TARGET.search(user)
    return (m.group(1), m.group(2).strip("\n"), m.end()) if m is not None else None


def _states(name: str, text: str, aspect: str) -> bool:
    """Whether the component's text already states what `aspect` needs."""
    checks, rounding = stated(text)
    return rounding.cents if aspect == "rounding" else checks[aspect]


def critique(user: str, rng: random.Random) -> str | None:
    found = _target(user)
    if found is None:
        return None
    name, text, end = found
    failing: Counter[str] = Counter()
    for line in feedback_texts(user, end):
        failing.update(aspects_in_feedback(line))
    points = []
    for aspect in sorted(failing, key=lambda a: (-failing[a], a)):
        n = failing[aspect]
        if ASPECT_OWNER[aspect] != name:
            points.append(f"- Not caused by this component: {n} failure(s) of the {aspect} check belong to "
                          f"[{ASPECT_OWNER[aspect]}].")
        elif _states(name, text, aspect):
            points.append(f"- It already states the {aspect} step; in {n} example(s) the assistant did not follow it.")
        elif rng.random() < P_DIAGNOSE:
            points.append(f"- In {n} example(s) the {aspect} check failed because {CAUSE[aspect]}.")
        else:
            points.append(VAGUE_POINT)
    if not points:
        points.append("- No failure in these examples is caused by this component.")
    return f"Critique of [{name}]:\n" + "\n".join(points)


def apply(user: str, rng: random.Random) -> str | None:
    found = _target(user)
    if found is None or "## Critique" not in user:
        return None
    name, text, _ = found
    said = user.split("## Critique", 1)[1].lower()
    code = "def round_total" in text
    done = []
    for aspect, cause in CAUSE.items():
        if cause.lower() not in said or rng.random() >= P_APPLY:
            continue
        if aspect == "rounding" and code:
            text = FIX_CODE.format(places=1 if rng.random() < P_WRONG_PLACES else 2)
        elif not code and FIX_TEXT[aspect] not in text:
            text = f"{text.rstrip()}\n{FIX_TEXT[aspect]}"
        else:
            continue
        done.append(aspect)
    if not done:
        line = rng.choice(_GENERIC)
        text = f"{text.rstrip()}\n{'# ' + line if code else line}"
    return f"Reasoning: I applied the critique ({', '.join(done) or 'no cause named'}).\n```\n{text}\n```"


class AgentTextGradBehaviour:
    """The agent-tools world's answers to textgrad's gradient and apply requests (``SimBehaviour``)."""

    name = "agent_tools textgrad"

    def recognises(self, request: SimRequest) -> bool:
        if request.kind != "propose":
            return False
        found = _target(request.user)
        if found is None or found[0] not in _AGENT_PARTS:
            return False
        if GRADIENT_MARKER in request.system:
            return _ORDER_LINE.search(request.user, found[2]) is not None
        return APPLY_MARKER in request.system

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        if GRADIENT_MARKER in request.system:
            return critique(request.user, rng)
        return apply(request.user, rng)
