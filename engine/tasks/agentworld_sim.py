"""The agent-tools task's plug-in for the simulated model (``AgentWorldBehaviour``).

Recognised by content only (engine/llm/sim/plugins.py): a task request is an order message
(``Order: N x item`` / ``Pay in: CUR``); a proposal request is a reflection (a fenced block and
feedback) whose examples are such orders. Every probability is a module constant, documented in
engine/llm/sim/README.md ("The agent-tools task's plug-in").

Task model (the agent): reads each check's statement where an agent looks for it: the answer
form and the quantity rule in the system prompt, the price unit in lookup's description, the
conversion direction in convert's description (a text that is not a component rendering is read
whole for all of them). A stated step is done right with P_FOLLOW, an unstated one with P_LUCKY.
The rounding is whatever round_total's source does (engine/tasks/agentworld.py: rounding_of, read
with ``ast``, never executed): code is not followed by chance.

Reflector: edits the component(s) the request asks for. For a failing check that component owns
it writes the fix with P_FIX (the code fix rounds to one place instead of two with
P_WRONG_PLACES), else generic advice. For a check another component owns it writes that check's
fix into the wrong component with P_MISPLACED (the agent does not read it there: a wasted
proposal, which is what blame-based selection avoids), else generic advice.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine import components
from engine.llm.sim.feedback import feedback_texts, has_feedback
from engine.llm.sim.plugins import SimRequest
from engine.tasks.agentworld import ASPECT_OWNER, Rounding, aspects_in_feedback, compute, parse_order, rounding_of

P_FOLLOW = 0.95
"""A step whose statement the agent reads is done right this often."""
P_LUCKY = 0.1
"""A step nobody stated is done right anyway this often."""
P_FIX = 0.7
"""The reflector fixes a failing check the edited component owns (else: generic advice)."""
P_SECOND = 0.25
"""When the component owns two failing checks, it fixes the second one too."""
P_WRONG_PLACES = 0.2
"""The code fix rounds to one decimal place instead of two."""
P_MISPLACED = 0.5
"""For a check another component owns, the reflector writes its fix into this one anyway."""

FIX_TEXT = {
    "format": "End your reply with one line `TOTAL: <amount> <CUR>`, e.g. `TOTAL: 12.50 EUR`.",
    "quantity": "Multiply the unit price by the quantity ordered.",
    "cents": "It returns the unit price in cents (an integer); divide by 100 to get US dollars.",
    "direction": "convert(amount, currency) converts an amount from USD into the target currency.",
    "rounding": "Round every total to 2 decimal places.",
}
FIX_CODE = 'def round_total(x):\n    """Round a total to cents for display."""\n    return round(x, {places})'
_VAGUE = ("Be precise and double-check the answer.", "Think step by step before answering.",
          "Answer the customer politely and clearly.", "Use the tools whenever they help.")
_VAGUE_CODE = ("# totals are shown to customers", "# keep the result a number", "# reviewed")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_SINGLE = re.compile(r"^## Current instructions: component \[([A-Za-z0-9_.-]+)\]\s*$", re.M)
_MULTI = re.compile(r"^### \[([A-Za-z0-9_.-]+)\]\s*\n```[^\n]*\n(.*?)```", re.S | re.M)
_QUANTITY = re.compile(r"multipl\w*[^.\n]*quantit|quantit\w*[^.\n]*multipl")
_DIRECTION = re.compile(r"from usd\b[^.\n]*\b(into|to)\b")
_CENTS = re.compile(r"\bcents\b")
_ORDER_LINE = re.compile(r"^Order: \d+ x [a-z]+\s*$", re.M)


# -- the agent -----------------------------------------------------------------------------------
def stated(system: str) -> tuple[dict[str, bool], Rounding]:
    """Which steps the agent's instructions state, and what its rounding tool does."""
    parts = components.split_rendering(system)
    texts = dict(parts) if parts is not None else {}

    def of(name: str) -> str:
        return texts.get(name, "") if parts is not None else system

    checks = {
        "format": "TOTAL:" in of("system"),
        "quantity": _QUANTITY.search(of("system").lower()) is not None,
        "cents": _CENTS.search(of("tool_lookup").lower()) is not None,
        "direction": _DIRECTION.search(of("tool_convert").lower()) is not None,
    }
    return checks, rounding_of(of("round_total"))


def _amount_text(x: float, rounding: Rounding) -> str:
    if rounding.kind == "round":
        return f"{x:.{rounding.places}f}"
    if rounding.kind == "truncate":
        return str(int(x))
    return repr(x)


def answer_order(system: str, order: dict, rng: random.Random) -> str:
    checks, rounding = stated(system)
    done = {k: rng.random() < (P_FOLLOW if v else P_LUCKY) for k, v in checks.items()}
    amount = compute(order, quantity=done["quantity"], cents=done["cents"], direction=done["direction"],
                     rounding=rounding)
    text = _amount_text(amount, rounding)
    reasoning = "Reasoning: looked the item up, converted the price and rounded it with round_total."
    if done["format"]:
        return f"{reasoning}\nTOTAL: {text} {order['currency']}"
    return f"{reasoning}\nThe total for your order comes to {text} {order['currency']}."


# -- the reflector ---------------------------------------------------------------------------------
def _failing(user: str, start: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in feedback_texts(user, start):
        counts.update(aspects_in_feedback(line))
    return counts


def _vague(text: str, code: bool, rng: random.Random) -> str:
    pool = [v for v in (_VAGUE_CODE if code else _VAGUE) if v not in text]
    if not pool:
        return text
    return f"{text.rstrip()}\n{rng.choice(pool)}"


def edit_component(name: str, text: str, failing: Counter[str], rng: random.Random) -> tuple[str, str]:
    """(new text, what was done) for one component; `name` "*" is a text that is not a rendering."""
    code = "def round_total" in text
    owned = [a for a in sorted(failing, key=lambda a: (-failing[a], a))
             if name == "*" or ASPECT_OWNER[a] == name]
    if owned:
        if rng.random() >= P_FIX:
            return _vague(text, code, rng), "gave generic advice"
        chosen = owned[:2] if len(owned) > 1 and rng.random() < P_SECOND else owned[:1]
        for aspect in chosen:
            if aspect == "rounding" and code:
                places = 1 if rng.random() < P_WRONG_PLACES else 2
                text = FIX_CODE.format(places=places)
            elif FIX_TEXT[aspect] not in text:
                text = f"{text.rstrip()}\n{FIX_TEXT[aspect]}"
        return text, "fixed " + " and ".join(chosen)
    others = sorted(failing, key=lambda a: (-failing[a], a))
    if others and rng.random() < P_MISPLACED and not code and FIX_TEXT[others[0]] not in text:
        return f"{text.rstrip()}\n{FIX_TEXT[others[0]]}", f"addressed {others[0]} here"
    return _vague(text, code, rng), "gave generic advice"


def reflect(user: str, rng: random.Random) -> str | None:
    first = _FENCE.search(user)
    if first is None:
        return None
    failing = _failing(user, first.end())
    single = _SINGLE.search(user)
    if single is not None:
        new, note = edit_component(single.group(1), first.group(1).strip("\n"), failing, rng)
        return f"Reasoning: I {note}.\n```\n{new}\n```"
    if "## Current instructions: the components to improve" in user:
        section = user.split("## Current instructions: the components to improve", 1)[1].split("## Examples", 1)[0]
        out, notes = [], []
        for m in _MULTI.finditer(section):
            new, note = edit_component(m.group(1), m.group(2).strip("\n"), failing, rng)
            out.append(f"### [{m.group(1)}]\n```\n{new}\n```")
            notes.append(f"{m.group(1)}: {note}")
        return f"Reasoning: {'; '.join(notes)}.\n" + "\n".join(out) if out else None
    new, note = edit_component("*", first.group(1).strip("\n"), failing, rng)
    return f"Reasoning: I {note}.\n```\n{new}\n```"


class AgentWorldBehaviour:
    """The agent-tools world as a simulator plug-in (``SimBehaviour``): agent and reflector."""

    name = "agent_tools"

    def recognises(self, request: SimRequest) -> bool:
        if request.kind == "task":
            return parse_order(request.user) is not None
        if request.kind == "propose":
            m = _FENCE.search(request.user)
            return (m is not None and has_feedback(request.user, m.end())
                    and _ORDER_LINE.search(request.user, m.end()) is not None)
        return False

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        if request.kind == "propose":
            return reflect(request.user, rng)
        order = parse_order(request.user) if request.kind == "task" else None
        return answer_order(request.system, order, rng) if order is not None else None
