"""The simulated prompt engineer: edits to a prompt evolved as a text file (OpenEvolve's
prompt-optimisation folders, candidate language "text").

A prompt has no constants or statements, so the program edit model (program_model.py) could
only flip an "and" to an "or". A prompt engineer instead adds an instruction the prompt lacks,
adopts a sentence from a better prompt shown in the request, or drops a sentence. The
instructions are generic prompt-engineering advice, not any task's answer: a task's evaluator
decides whether they help.
"""

from __future__ import annotations

import random
import re

INSTRUCTIONS = (
    "Think step by step before giving the final answer.",
    "Read the whole input carefully before answering.",
    "You must follow the required output format exactly.",
    "Answer with exactly one word or label when a label is asked for.",
    "Put the final answer on the last line, with nothing after it.",
    "If the input is ambiguous, choose the most likely answer instead of refusing.",
    "Use the examples, if any are given, as a guide to the expected answer.",
    "Do not add explanations unless they are asked for.",
)
P_ADD = 0.6
P_BORROW = 0.25
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if len(s.strip()) > 8]


def choose_edit(code: str, others: list[str], rng: random.Random) -> tuple[str, list[tuple[str, str]] | None]:
    """(reason, [(old, new)]) against the prompt text, or (reason, None) when nothing applies."""
    lines = code.rstrip("\n").splitlines()
    if not lines:
        return "Write a first instruction.", None
    last = lines[-1]
    lower = code.lower()
    roll = rng.random()
    if roll < P_BORROW and others:
        mine = set(_sentences(code))
        theirs = [s for other in others for s in _sentences(other) if s not in mine and s.lower() not in lower]
        if theirs and code.count(last) == 1:
            return "Adopt an instruction from a better prompt.", [(last, f"{last}\n{rng.choice(theirs)}")]
    missing = [s for s in INSTRUCTIONS if s.lower() not in lower]
    if missing and roll < P_BORROW + P_ADD and code.count(last) == 1:
        return "Add an instruction the prompt lacks.", [(last, f"{last}\n{rng.choice(missing)}")]
    droppable = [s for s in _sentences(code) if code.count(s) == 1 and s not in lines[0]]
    if droppable:
        s = rng.choice(droppable)
        return "Drop an instruction that may distract the model.", [(s, "")]
    if missing and code.count(last) == 1:
        return "Add an instruction the prompt lacks.", [(last, f"{last}\n{rng.choice(missing)}")]
    return "The prompt already says all I would add.", None
