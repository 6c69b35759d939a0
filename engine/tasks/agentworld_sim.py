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

Stale-proposal judge (reflective policy): patch when the stale proposal gets a check right that
the current best does not (the best with the proposal's owning components), else discard;
flipped with P_MISJUDGE.

Reflector: edits the component(s) the request asks for. For a failing check that component owns
it writes the fix with P_FIX (the code fix rounds to one place instead of two with
P_WRONG_PLACES), else generic advice. For a check another component owns it writes that check's
fix into the wrong component with P_MISPLACED (the agent does not read it there: a wasted
proposal, which is what blame-based selection avoids), else generic advice. A rewritten
component keeps each frozen region its request quotes with P_KEEP_FROZEN (engine/llm/sim/frozen.py).
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine import components
from engine.llm.sim.feedback import feedback_texts, has_feedback
from engine.llm.sim.frozen import frozen_regions, keep_frozen
from engine.llm.sim.plugins import SimRequest
from engine.llm.sim.textgrad_answers import is_textgrad
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
P_MISJUDGE = 0.1
"""The stale-proposal judge gets the verdict wrong this often."""

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


def _edit(name: str, text: str, failing: Counter[str], frozen: dict[str, list[str]],
          rng: random.Random) -> tuple[str, str]:
    """edit_component, then the request's frozen regions of `name` kept (mostly) as they were."""
    new, note = edit_component(name, text, failing, rng)
    if new == text or not frozen.get(name):
        return new, note
    new, dropped = keep_frozen(new, frozen[name], rng)
    return new, note + (f" (and dropped {dropped} frozen region(s))" if dropped else "")


def reflect(user: str, rng: random.Random) -> str | None:
    first = _FENCE.search(user)
    if first is None:
        return None
    failing = _failing(user, first.end())
    frozen = frozen_regions(user)
    single = _SINGLE.search(user)
    if single is not None:
        new, note = _edit(single.group(1), first.group(1).strip("\n"), failing, frozen, rng)
        return f"Reasoning: I {note}.\n```\n{new}\n```"
    if "## Current instructions: the components to improve" in user:
        section = user.split("## Current instructions: the components to improve", 1)[1].split("## Examples", 1)[0]
        out, notes = [], []
        for m in _MULTI.finditer(section):
            new, note = _edit(m.group(1), m.group(2).strip("\n"), failing, frozen, rng)
            out.append(f"### [{m.group(1)}]\n```\n{new}\n```")
            notes.append(f"{m.group(1)}: {note}")
        return f"Reasoning: {'; '.join(notes)}.\n" + "\n".join(out) if out else None
    new, note = edit_component("*", first.group(1).strip("\n"), failing, rng)
    return f"Reasoning: I {note}.\n```\n{new}\n```"


# -- the stale-proposal judge (reflective policy) ------------------------------------------------
_AGENT_PARTS = {"system", "tool_lookup", "tool_convert", "round_total"}


def _agent_rendering(text: str) -> dict[str, str] | None:
    parts = components.split_rendering(text)
    return dict(parts) if parts is not None and _AGENT_PARTS <= {n for n, _ in parts} else None


def judge(user: str, rng: random.Random) -> str | None:
    """VERDICT/REASON for a stale proposal: patch when the proposal gets a check right that the
    current best does not (the best with the proposal's owning component(s) taken over), else
    discard as redundant; flipped with P_MISJUDGE."""
    if "## Stale proposal" not in user or "## Current best instructions" not in user:
        return None
    blocks = _FENCE.findall(user)
    if len(blocks) < 2:
        return None
    best, child = _agent_rendering(blocks[0].strip("\n")), _agent_rendering(blocks[-1].strip("\n"))
    if best is None or child is None:
        return None
    best_checks, best_rounding = stated(blocks[0])
    child_checks, child_rounding = stated(blocks[-1])
    gains = [a for a, ok in child_checks.items() if ok and not best_checks[a]]
    if child_rounding.cents and not best_rounding.cents:
        gains.append("rounding")
    owners = sorted({ASPECT_OWNER[a] for a in gains})
    verdict = "patch" if owners else "discard"
    reason = (f"gets {', '.join(gains)} right where the current best does not" if owners
              else "redundant: the current best already gets its checks right")
    if rng.random() < P_MISJUDGE:
        verdict, reason = ("discard" if verdict == "patch" else "keep"), "(misjudged) " + reason
    if verdict != "patch":
        return f"VERDICT: {verdict}\nREASON: {reason}"
    names = [n for n, _ in components.split_rendering(blocks[0].strip("\n"))]
    merged = [components.Component(n, child[n] if n in owners else best[n]) for n in names]
    return f"VERDICT: patch\nREASON: {reason}\n```\n{components.render(merged)}\n```"


class AgentWorldBehaviour:
    """The agent-tools world as a simulator plug-in (``SimBehaviour``): agent and reflector."""

    name = "agent_tools"

    def recognises(self, request: SimRequest) -> bool:
        if request.kind == "task":
            return parse_order(request.user) is not None
        if request.kind == "propose":
            if is_textgrad(request):  # a textgrad call: agentworld_textgrad_sim.py answers it
                return False
            m = _FENCE.search(request.user)
            return (m is not None and has_feedback(request.user, m.end())
                    and _ORDER_LINE.search(request.user, m.end()) is not None)
        if request.kind == "judge":
            blocks = _FENCE.findall(request.user)
            return "## Stale proposal" in request.user and bool(blocks) and _agent_rendering(blocks[0]) is not None
        return False

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        if request.kind == "judge":
            return judge(request.user, rng)
        if request.kind == "propose":
            return reflect(request.user, rng)
        order = parse_order(request.user) if request.kind == "task" else None
        return answer_order(request.system, order, rng) if order is not None else None
