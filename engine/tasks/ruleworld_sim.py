"""The rules task's plug-in for the simulated model (``RuleWorldBehaviour``).

The simulator knows no task (engine/llm/sim/plugins.py); this module teaches it the rule world,
recognising requests by content only. Task model: reads which rules the system prompt states
(keyword recognition, so a real LLM's wording counts too) and formats the example, following each
applicable rule with a probability that depends on how it is stated. Reflector: reads only the
request text (the current instructions in the first fenced block and the feedback, as ``Feedback:``
lines or under ``Feedback`` headings as GEPA's template writes it, see engine/llm/sim/feedback.py),
maps feedback sentences back to rules and returns edited instructions, with realistic mistakes.
Stale-proposal judge (reflective async): compares the rule statements a stale proposal added with
the current best. Every probability is a module constant documented in engine/llm/sim/README.md.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine.llm.sim.feedback import feedback_texts, has_feedback
from engine.llm.sim.plugins import SimRequest
from engine.llm.sim.textgrad_answers import is_textgrad
from engine.tasks.ruleworld import RULE_BY_ID, RULES, classify, distinct, parse_input, prompt_status, sentences

P_FOLLOW_STATED = 0.94
"""A rule stated correctly (and not contradicted) is followed with this probability."""
P_LUCKY = 0.10
"""An unstated rule is followed anyway by luck (otherwise the model's default habit)."""
P_CONFLICT_RIGHT = 0.5
"""A rule stated both correctly and in a wrong variant: the right one wins this often."""
P_ITEM_SLIP = 0.02
"""The model drops an item (content error, score 0) this often."""

P_SECOND_EDIT = 0.25
"""The reflector addresses two failing rules instead of one."""
P_VAGUE = 0.25
"""The reflector writes generic advice that states no rule, instead of addressing a failing one."""
P_WRONG_VARIANT = 0.15
"""The reflector misreads feedback and writes the rule's wrong variant."""
P_FIX_CONFLICT = 0.7
"""When a failing rule is stated wrongly, the reflector removes the wrong statement."""
P_DROP_LINE = 0.07
"""The reflector accidentally drops one existing line."""
P_REDUNDANT = 0.10
"""The reflector restates an already stated rule (a redundant edit)."""

P_MISJUDGE = 0.1
"""The simulated stale-proposal judge gets the verdict wrong this often."""

_VAGUE = (
    "Pay close attention to the required format of each list.",
    "Double-check the formatting before answering.",
    "Follow the house style for lists carefully.",
)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _choice(status: str, rng: random.Random) -> str:
    """Which behaviour the model shows for one applicable rule: right, wrong or default."""
    if status == "right":
        return "right" if rng.random() < P_FOLLOW_STATED else "default"
    if status == "wrong":
        return "wrong" if rng.random() < P_FOLLOW_STATED else "default"
    if status == "both":
        return "right" if rng.random() < P_CONFLICT_RIGHT else "wrong"
    return "right" if rng.random() < P_LUCKY else "default"


def render(ex: dict, choice: dict[str, str]) -> str:
    """The answer line for an example given a behaviour per rule (missing = default)."""
    c = choice.get
    items = list(ex["items"])
    n = len(distinct(items))
    if c("dedupe") == "right":
        items = distinct(items)
    cat = ex["category"]
    if cat == "vegetable" and c("veg_upper") in ("right", "wrong"):
        items = [i.upper() if c("veg_upper") == "right" else i.lower() for i in items]
    if cat == "animal" and c("animal_title") in ("right", "wrong"):
        items = [i.capitalize() if c("animal_title") == "right" else i.upper() for i in items]
    if cat == "fruit" and c("fruit_alpha") in ("right", "wrong"):
        items.sort(key=str.lower, reverse=c("fruit_alpha") == "wrong")
    if cat == "color" and c("color_length") in ("right", "wrong"):
        items.sort(key=len, reverse=c("color_length") == "wrong")
    sep = {"right": " ; ", "wrong": " / "}.get(c("separator", "default"), ", ")
    line = sep.join(items)
    if cat == "tool" and c("tool_brackets") == "right":
        line = f"[{line}]"
    elif cat == "tool" and c("tool_brackets") == "wrong":
        line = f"({line})"
    if n > 4 and c("count_prefix") == "right":
        line = f"{n}: {line}"
    elif n > 4 and c("count_prefix") == "wrong":
        line = f"{line} ({n})"
    if ex["audience"] == "kids" and c("kids_star") == "right":
        line = "* " + line
    elif ex["audience"] == "kids" and c("kids_star") == "wrong":
        line += " *"
    if ex["priority"] == "high" and c("priority_bang") == "right":
        line += " !!"
    elif ex["priority"] == "high" and c("priority_bang") == "wrong":
        line = "!! " + line
    return line


def answer_example(prompt: str, ex: dict, rng: random.Random) -> str:
    """Visible reply of the task model: a reasoning line and the answer line."""
    status = prompt_status(prompt)
    applicable = [r for r in RULES if r.applies(ex)]
    choice = {r.id: _choice(status[r.id], rng) for r in applicable}
    uniq = distinct(ex["items"])
    if len(uniq) > 1 and rng.random() < P_ITEM_SLIP:
        lost = uniq[-1].lower()
        ex = {**ex, "items": [i for i in ex["items"] if i.lower() != lost]}
    followed = sum(1 for r in applicable if status[r.id] != "none")
    reasoning = (f"Reasoning: {len(ex['items'])} {ex['category']} items; the instructions give "
                 f"{followed} formatting rule(s) that apply here.")
    return f"{reasoning}\n{render(ex, choice)}"


def _lines_stating(lines: list[str], rid: str, kind: str) -> list[int]:
    return [k for k, line in enumerate(lines) if (rid, kind) in classify(line)]


def _restatement(rid: str, rng: random.Random) -> str:
    rule = RULE_BY_ID[rid]
    return rng.choice(("IMPORTANT: ", "Remember: ", "")) + rng.choice(rule.paraphrases + (rule.statement,))


def reflect(user_text: str, rng: random.Random) -> str | None:
    """Proposal for a rule-world reflection request, or None if the request is not one."""
    m = _FENCE.search(user_text)
    if not m:
        return None
    feedback = feedback_texts(user_text, m.end())
    if not feedback:
        return None
    current = m.group(1).strip("\n")
    failing: Counter[str] = Counter()
    for line in feedback:
        for sentence in sentences(line):
            failing.update(rid for rid, kind in classify(sentence) if kind == "right")
    lines = current.splitlines()
    status = prompt_status(current)
    order = sorted(failing, key=lambda rid: (-failing[rid], rng.random()))
    chosen = order[: 2 if rng.random() < P_SECOND_EDIT else 1]
    protected: set[str] = set()
    notes = []
    for rid in chosen:
        rule = RULE_BY_ID[rid]
        if rng.random() < P_VAGUE:
            lines.append(rng.choice(_VAGUE))
            notes.append("asked for more care with the format")
            continue
        st = status[rid]
        if st in ("wrong", "both") and rng.random() < P_FIX_CONFLICT:
            wrong_lines = set(_lines_stating(lines, rid, "wrong"))
            lines = [ln for k, ln in enumerate(lines) if k not in wrong_lines]
            if st == "wrong":
                lines.append(rule.statement)
                protected.add(rule.statement)
            notes.append(f"fixed the rule about {rid.replace('_', ' ')}")
        elif st in ("right", "both"):
            new = _restatement(rid, rng)
            lines.append(new)
            protected.add(new)
            notes.append(f"stressed the rule about {rid.replace('_', ' ')}")
        else:
            new = rule.wrong if rng.random() < P_WRONG_VARIANT else rule.statement
            lines.append(new)
            protected.add(new)
            notes.append(f"added a rule about {rid.replace('_', ' ')}")
    droppable = [k for k, ln in enumerate(lines) if ln.strip() and ln not in protected]
    if droppable and rng.random() < P_DROP_LINE:
        del lines[rng.choice(droppable)]
    stated = [rid for rid, st in status.items() if st == "right" and rid not in chosen]
    if stated and rng.random() < P_REDUNDANT:
        lines.append(_restatement(rng.choice(stated), rng))
    if not notes:
        notes.append("found no specific formatting problem to fix")
    new_text = "\n".join(lines).strip() or current
    return f"Reasoning: from {len(feedback)} feedback line(s) I {'; '.join(notes)}.\n```\n{new_text}\n```"


def judge(user_text: str, rng: random.Random) -> str | None:
    """A VERDICT/REASON answer to a stale-proposal check, or None when the request is not one.

    Reads the current best instructions (first fenced block), the stale proposal's change (the
    `+` lines of its diff) and classifies the rule statements the proposal added:
    - all already stated correctly in the best       -> discard (redundant)
    - a wrong variant of a rule the best states right -> discard (conflicting)
    - rules the best lacks (or states wrongly)        -> patch: the best plus those lines
    - nothing recognisable added                      -> discard (too specific / vague)
    With probability P_MISJUDGE the verdict is flipped between patch/keep and discard, so
    reflection is useful but not an oracle.
    """
    if "## Stale proposal" not in user_text or "## Current best instructions" not in user_text:
        return None
    blocks = _FENCE.findall(user_text)
    if len(blocks) < 2:
        return None
    best = blocks[0].strip("\n")
    section = user_text.split("## Stale proposal", 1)[1].split("## Pool changes since then", 1)[0]
    added = [ln[1:].strip() for ln in section.splitlines() if ln.startswith("+") and ln[1:].strip()]
    status = prompt_status(best)
    new_lines: list[str] = []
    redundant = conflicting = 0
    for line in added:
        stated = classify(line)
        if not stated:
            continue
        useful = False
        for rid, kind in stated:
            if kind == "right" and status[rid] in ("none", "wrong"):
                useful = True
            elif kind == "wrong" and status[rid] in ("right", "both"):
                conflicting += 1
            else:
                redundant += 1
        if useful:
            new_lines.append(line)
    if new_lines:
        verdict, reason = "patch", f"adds {len(new_lines)} rule(s) the current best lacks"
    elif conflicting:
        verdict, reason = "discard", "conflicts with a rule the current best already states"
    elif redundant:
        verdict, reason = "discard", "redundant: the current best already states it"
    else:
        verdict, reason = "discard", "too specific: no transferable rule"
    if rng.random() < P_MISJUDGE:
        verdict = "discard" if verdict == "patch" else "keep"
        reason = "(misjudged) " + reason
    if verdict == "patch":
        patched = "\n".join([best.rstrip(), *new_lines]).strip()
        return f"VERDICT: patch\nREASON: {reason}\n```\n{patched}\n```"
    return f"VERDICT: {verdict}\nREASON: {reason}"


class RuleWorldBehaviour:
    """The rule world as a simulator plug-in (``SimBehaviour``): task model, reflector, judge.

    Recognition is by content: an example input (``Category:`` / ``Items:`` lines) for task
    requests, a fenced block followed by feedback (``Feedback:`` lines or headings) for proposals, the stale-proposal
    headings for judge requests. Like a real model it also reflects on another prompt task's
    feedback (finding no rule to fix there), which is what the simulator has always done.
    """

    name = "rules"

    def recognises(self, request: SimRequest) -> bool:
        user = request.user
        if request.kind == "task":
            return parse_input(user) is not None
        if request.kind == "propose":
            if is_textgrad(request):  # a critique or a step from one, not a reflection
                return False
            m = _FENCE.search(user)
            return m is not None and has_feedback(user, m.end())
        if request.kind == "judge":
            return "## Stale proposal" in user and "## Current best instructions" in user
        return False

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        if request.kind == "judge":
            return judge(request.user, rng)
        if request.kind == "propose":
            return reflect(request.user, rng)
        example = parse_input(request.user) if request.kind == "task" else None
        return answer_example(request.system or request.user, example, rng) if example is not None else None
