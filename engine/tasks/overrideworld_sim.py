"""The overrides task's plug-in for the simulated model (``OverrideWorldBehaviour``).

Task model: reads which rules the system prompt states (overrideworld.read_prompt, keyword
recognition, so any wording counts) and decides each aspect of the answer from the rules that
apply to the example: one applicable value is followed with P_FOLLOW_STATED; rules that disagree
(a base rule and its exception, or an exception written without its condition beside the base)
leave the model torn, picking among them at random, unless the prompt says the specific rule
wins and a scoped exception applies. Nothing stated: the model's habit (the items as given,
joined by ', ', no ending).

Reflector: reads the current instructions (first fenced block) and this task's feedback (the
metric's "Style rule broken:" sentences, as ``Feedback:`` lines or GEPA's headings), and edits
one or two of the failing aspects. Like a real model it often writes an exception without its
condition (P_UNSCOPED: the over-general edit that fixes the minibatch and breaks the others),
and only sometimes sees that a torn rule needs the precedence sentence (P_SEE_PRECEDENCE).
Every probability is a module constant documented in engine/llm/sim/README.md.
"""

from __future__ import annotations

import random
import re
from collections import Counter

from engine.llm.sim.feedback import feedback_texts
from engine.llm.sim.plugins import SimRequest
from engine.llm.sim.textgrad_answers import is_textgrad
from engine.tasks.overrideworld import (FEEDBACK_TAG, PRECEDENCE, RULES, Reading, classify, holds, parse_input,
                                        read_prompt, statement)

P_FOLLOW_STATED = 0.94
"""One applicable value for an aspect: followed with this probability (else the model's habit)."""
P_ITEM_SLIP = 0.02
"""The model drops an item (content error, score 0) this often."""

P_SECOND_EDIT = 0.25
"""The reflector addresses two failing aspects instead of one."""
P_VAGUE = 0.2
"""The reflector writes generic advice that states no rule."""
P_UNSCOPED = 0.4
"""The reflector writes an exception without its condition ("Write the items in UPPERCASE.")."""
P_FIX_CONFLICT = 0.6
"""Adding a rule, the reflector removes the lines that contradict it outright."""
P_SEE_PRECEDENCE = 0.35
"""A rule already stated but not followed (the model was torn): the reflector adds the
precedence sentence; otherwise it restates the rule."""
P_DROP_LINE = 0.07
"""The reflector accidentally drops one existing line."""

_VAGUE = ("Pay close attention to the required format of each list.",
          "Double-check the house style before answering.")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _value(reading: Reading, aspect: str, ex: dict, rng: random.Random) -> str | None:
    """The value the model writes for one aspect, None for its habit."""
    stated = [(v, c) for (a, v, c) in reading.statements if a == aspect and (c is None or holds(c, ex))]
    if not stated:
        return None
    scoped = {v for v, c in stated if c is not None}
    values = sorted(scoped if scoped and reading.precedence else {v for v, _ in stated})
    if len(values) == 1:
        return values[0] if rng.random() < P_FOLLOW_STATED else None
    return rng.choice(values)  # torn between rules that disagree


def render(ex: dict, value: dict[str, str | None]) -> str:
    items = list(ex["items"])
    if value["case"] == "lower":
        items = [i.lower() for i in items]
    elif value["case"] == "upper":
        items = [i.upper() for i in items]
    if value["order"] == "alpha":
        items.sort(key=str.lower)
    line = {"semi": " ; ", "pipe": " | "}.get(value["separator"] or "", ", ").join(items)
    return line + {"period": ".", "bang": " !!"}.get(value["ending"] or "", "")


def answer_example(prompt: str, ex: dict, rng: random.Random) -> str:
    reading = read_prompt(prompt)
    value = {aspect: _value(reading, aspect, ex, rng) for aspect in RULES}
    if len(ex["items"]) > 1 and rng.random() < P_ITEM_SLIP:
        ex = {**ex, "items": ex["items"][:-1]}
    told = sum(1 for v in value.values() if v is not None)
    return f"Reasoning: {len(ex['items'])} {ex['kind']} items; the instructions decide {told} of 4 style points.\n" \
           f"{render(ex, value)}"


def _contradicting(lines: list[str], aspect: str, value: str, scoped: bool) -> set[int]:
    """Lines a new rule contradicts outright: an unscoped rule contradicts every unscoped line of
    another value of its aspect; a scoped exception contradicts the same value written unscoped."""
    out = set()
    for k, line in enumerate(lines):
        for a, v, c in classify(line):
            if a == aspect and c is None and ((not scoped and v != value) or (scoped and v == value)):
                out.add(k)
    return out


def reflect(user_text: str, rng: random.Random) -> str | None:
    """Proposal for an overrides reflection request, or None if the request is not one."""
    m = _FENCE.search(user_text)
    if not m:
        return None
    feedback = feedback_texts(user_text, m.end())
    failing: Counter[tuple[str, str, str | None]] = Counter()
    for text in feedback:
        for part in text.split(FEEDBACK_TAG)[1:]:
            failing.update(classify(part.split(".")[0]))
    current = m.group(1).strip("\n")
    if not failing:
        return f"Reasoning: every answer followed the house style; nothing to change.\n```\n{current}\n```"
    lines = current.splitlines()
    reading = read_prompt(current)
    order = sorted(failing, key=lambda s: (-failing[s], rng.random()))
    notes, protected = [], set()
    for aspect, value, cond in order[: 2 if rng.random() < P_SECOND_EDIT else 1]:
        if rng.random() < P_VAGUE:
            lines.append(rng.choice(_VAGUE))
            notes.append("asked for more care with the style")
            continue
        if (aspect, value, cond) in reading.statements:  # stated, yet not followed: the model was torn
            new = PRECEDENCE if cond is not None and not reading.precedence and rng.random() < P_SEE_PRECEDENCE \
                else "IMPORTANT: " + statement(aspect, value, cond)
            notes.append(f"stressed the {aspect} rule" if new != PRECEDENCE else "said which rule wins")
        else:
            scope = None if cond is None or rng.random() < P_UNSCOPED else cond
            new = statement(aspect, value, scope)
            if rng.random() < P_FIX_CONFLICT:
                gone = _contradicting(lines, aspect, value, scope is not None)
                lines = [ln for k, ln in enumerate(lines) if k not in gone]
            notes.append(f"added a {aspect} rule" + (f" for {cond}" if scope else ""))
        lines.append(new)
        protected.add(new)
    droppable = [k for k, ln in enumerate(lines) if ln.strip() and ln not in protected]
    if droppable and rng.random() < P_DROP_LINE:
        del lines[rng.choice(droppable)]
    new_text = "\n".join(lines).strip() or current
    return f"Reasoning: from {len(feedback)} feedback item(s) I {'; '.join(notes)}.\n```\n{new_text}\n```"


class OverrideWorldBehaviour:
    """The overrides world as a simulator plug-in: task model and reflector, recognised by content
    (a ``Kind:``/``List:`` example; a fenced block with the metric's ``Style rule broken:`` feedback)."""

    name = "overrides"

    def recognises(self, request: SimRequest) -> bool:
        if request.kind == "task":
            return parse_input(request.user) is not None
        if request.kind == "propose":
            if is_textgrad(request):  # a critique or a step from one, not a reflection
                return False
            m = _FENCE.search(request.user)
            return m is not None and any(FEEDBACK_TAG in f for f in feedback_texts(request.user, m.end()))
        return False

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        if request.kind == "propose":
            return reflect(request.user, rng)
        example = parse_input(request.user) if request.kind == "task" else None
        return answer_example(request.system or request.user, example, rng) if example is not None else None
