"""How the simulated model behaves in the rule world.

Task model: reads which rules the system prompt states (keyword recognition, so a real LLM's
wording counts too) and formats the example, following each applicable rule with a probability
that depends on how it is stated. Reflector: reads only the request text (the current
instructions in the first fenced block and the ``Feedback:`` lines), maps feedback sentences back
to rules and returns edited instructions, with realistic mistakes. Every probability is a
module constant documented in README.md.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine.tasks.ruleworld import RULE_BY_ID, RULES, classify, distinct, prompt_status, sentences

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

_VAGUE = (
    "Pay close attention to the required format of each list.",
    "Double-check the formatting before answering.",
    "Follow the house style for lists carefully.",
)
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_FEEDBACK = re.compile(r"^[ \t>*#-]*Feedback:[ \t]*(.*)$", re.M | re.I)


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
    feedback = [f.group(1) for f in _FEEDBACK.finditer(user_text, m.end())]
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
