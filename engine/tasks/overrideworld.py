"""The rule world behind the built-in ``overrides`` task: house rules whose exceptions override them.

Each example asks for a list of items written on one line. Four aspects of the answer (letter
case, order, separator, ending) each have a base rule and one exception that overrides it under
a condition (an urgent order, a kids audience, a tool list):

    case       lowercase            except urgent orders: UPPERCASE
    order      alphabetical (A-Z)   except for kids: the order given
    separator  ' ; '                except tool lists: ' | '
    ending     a period             except urgent orders: ' !!' instead

Unlike the ``rules`` task (ten independent rules: any correct line only helps), edits interact
here. An exception written without its condition ("Write the items in UPPERCASE.") contradicts
the base rule on every other example; a base rule and its exception both stated leave the model
torn on the examples the exception covers unless the instructions also say that the specific
rule wins. So stacking the lines that each fixed some minibatch does not win: the instructions
must scope each exception and state the precedence. ``score`` checks the answer line of any
output (a real LLM's too); ``classify`` reads a sentence as (aspect, value, condition), which the
simulator's plug-in (overrideworld_sim.py) uses to answer as a model that follows what it is told.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

ASPECTS = ("case", "order", "separator", "ending")
CONDITIONS = ("urgent", "kids", "tool")


@dataclass(frozen=True)
class Aspect:
    name: str
    base: str
    exception: str
    condition: str
    """The exception's value replaces the base value on examples where this condition holds."""


RULES: dict[str, Aspect] = {a.name: a for a in (
    Aspect("case", "lower", "upper", "urgent"),
    Aspect("order", "alpha", "given", "kids"),
    Aspect("separator", "semi", "pipe", "tool"),
    Aspect("ending", "period", "bang", "urgent"),
)}

# How each (aspect, value) is recognised in a sentence, and how it is written canonically.
VALUE_PATTERNS: dict[tuple[str, str], re.Pattern[str]] = {
    ("case", "lower"): re.compile(r"lower\s?-?case|small letters", re.I),
    ("case", "upper"): re.compile(r"upper\s?-?case|all caps|capital letters|block capitals", re.I),
    ("order", "alpha"): re.compile(r"alphabetic|a to z|\ba-z\b", re.I),
    ("order", "given"): re.compile(r"order given|given order|original order|as given|do not sort|don't sort|unsorted", re.I),
    ("separator", "semi"): re.compile(r"semi-?colon|['\"`] ; ['\"`]", re.I),
    ("separator", "pipe"): re.compile(r"\bpipe|vertical bar|['\"`] \| ['\"`]", re.I),
    ("ending", "period"): re.compile(r"(?<!instead of a )\bperiod\b|full stop", re.I),
    ("ending", "bang"): re.compile(r"!!|exclamation|\bbang", re.I),
}
CONDITION_PATTERNS: dict[str, re.Pattern[str]] = {
    "urgent": re.compile(r"urgent|high.priority", re.I),
    "kids": re.compile(r"\bkids?\b|child", re.I),
    "tool": re.compile(r"\btools?\b", re.I),
}
PRECEDENCE_RE = re.compile(r"more specific|specific rule|exceptions? (?:win|override|take)|takes? precedence", re.I)
PRECEDENCE = "When two rules disagree, the more specific rule (the exception with a condition) wins."

_WRITE = {
    ("case", "lower"): "write the items in lowercase",
    ("case", "upper"): "write the items in UPPERCASE",
    ("order", "alpha"): "sort the items alphabetically (A to Z)",
    ("order", "given"): "keep the items in the order given (do not sort)",
    ("separator", "semi"): "join the items with ' ; ' (a semicolon)",
    ("separator", "pipe"): "join the items with ' | ' (a pipe)",
    ("ending", "period"): "end the line with a period",
    ("ending", "bang"): "end the line with ' !!' instead of a period",
}
_WHEN = {"urgent": "For urgent orders", "kids": "When the audience is kids", "tool": "For tool lists"}


def statement(aspect: str, value: str, condition: str | None) -> str:
    """The canonical sentence for a rule: unconditional, or scoped to a condition."""
    text = _WRITE[(aspect, value)]
    return f"{_WHEN[condition]}, {text}." if condition else text[0].upper() + text[1:] + "."


def canonical_prompt() -> str:
    """Instructions that state every base rule, every scoped exception and the precedence."""
    lines = ["Write the formatted list on one line."]
    for a in RULES.values():
        lines += [statement(a.name, a.base, None), statement(a.name, a.exception, a.condition)]
    return "\n".join([*lines, PRECEDENCE])


Statement = tuple[str, str, str | None]
"""(aspect, value, condition or None)."""


def classify(sentence: str) -> list[Statement]:
    """The rules a sentence states; a sentence naming one condition scopes its values to it."""
    conds = [c for c, rx in CONDITION_PATTERNS.items() if rx.search(sentence)]
    cond = conds[0] if len(conds) == 1 else None
    return [(aspect, value, cond) for (aspect, value), rx in VALUE_PATTERNS.items() if rx.search(sentence)]


_SENTENCE_SPLIT = re.compile(r"\n|(?<=[.!?])\s+(?=[A-Z])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s.strip()]


@dataclass(frozen=True)
class Reading:
    """What a prompt states: its rule statements and whether it says the specific rule wins."""

    statements: frozenset[Statement]
    precedence: bool


@lru_cache(maxsize=4096)
def read_prompt(text: str) -> Reading:
    found: set[Statement] = set()
    precedence = False
    for s in sentences(text):
        stated = classify(s)
        found.update(stated)
        precedence = precedence or (not stated and PRECEDENCE_RE.search(s) is not None)
    return Reading(frozenset(found), precedence)


def holds(condition: str, ex: dict) -> bool:
    return {"urgent": ex["urgent"], "kids": ex["audience"] == "kids", "tool": ex["kind"] == "tool"}[condition]


def expected(ex: dict) -> dict[str, str]:
    """The value each aspect must take on this example."""
    return {a.name: a.exception if holds(a.condition, ex) else a.base for a in RULES.values()}


# -- examples ----------------------------------------------------------------------------------
KINDS: dict[str, tuple[str, ...]] = {
    "fruit": ("Apple", "Banana", "Cherry", "Date", "Fig", "Grape", "Kiwi", "Lemon", "Mango", "Pear", "Plum"),
    "tool": ("Hammer", "Saw", "Wrench", "Drill", "Chisel", "Pliers", "Clamp", "Mallet", "Rasp", "Sander"),
    "animal": ("Cat", "Dog", "Horse", "Otter", "Zebra", "Lion", "Tiger", "Eagle", "Beaver", "Wolf"),
    "color": ("Red", "Blue", "Green", "Yellow", "Purple", "Black", "Teal", "Indigo", "Violet", "Amber"),
}


def format_input(kind: str, items: list[str], urgent: bool, audience: str) -> str:
    return (f"Kind: {kind}\nList: {', '.join(items)}\nUrgent: {'yes' if urgent else 'no'}\n"
            f"Audience: {audience}\nWrite the list on one line.")


_INPUT_RE = re.compile(r"Kind:\s*(\w+)\s*\n\s*List:\s*([^\n]*)\n\s*Urgent:\s*(yes|no)\s*\n\s*Audience:\s*(\w+)", re.I)


def parse_input(text: str) -> dict | None:
    """Read an example back from its input text (the simulated model only sees text)."""
    m = _INPUT_RE.search(text)
    if not m:
        return None
    items = [i.strip() for i in m.group(2).split(",") if i.strip()]
    if not items:
        return None
    return {"kind": m.group(1).lower(), "items": items, "urgent": m.group(3).lower() == "yes",
            "audience": m.group(4).lower()}


def generate_examples(seed: int, n: int, prefix: str) -> list[dict]:
    """n examples with ids ``{prefix}-000``...; each condition holds on about 40% of them, so every
    exception matters and a base rule stated unconditionally is wrong on a good share."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        kind = rng.choice(sorted(KINDS))
        if rng.random() < 0.15:
            kind = "tool"  # tool lists as often as the other conditions
        items = rng.sample(KINDS[kind], rng.randint(3, 6))
        urgent = rng.random() < 0.4
        audience = "kids" if rng.random() < 0.4 else "adults"
        out.append({"id": f"{prefix}-{k:03d}", "input": format_input(kind, items, urgent, audience), "kind": kind,
                    "items": items, "urgent": urgent, "audience": audience})
    return out


# -- scoring -----------------------------------------------------------------------------------
_FENCE_LINE = re.compile(r"^`{3,}\w*$")
_LABEL = re.compile(r"^(?:final answer|answer|output)\s*:\s*", re.I)
FEEDBACK_TAG = "Style rule broken:"
"""Every failure sentence of the metric starts with this (the simulator's reflector recognises
this task's feedback by it, never by the task's name)."""
_FEEDBACK = {
    ("case", "lower"): "items must be in lowercase",
    ("case", "upper"): "items must be in UPPERCASE because the order is urgent",
    ("order", "alpha"): "items must be sorted alphabetically (A to Z)",
    ("order", "given"): "for a kids audience items must keep the order given (not sorted)",
    ("separator", "semi"): "items must be joined with ' ; ' (a semicolon)",
    ("separator", "pipe"): "tool lists must be joined with ' | ' (a pipe)",
    ("ending", "period"): "the line must end with a period",
    ("ending", "bang"): "an urgent order must end with ' !!' instead of a period",
}


def answer_line(output: str) -> str:
    for raw in reversed(output.splitlines()):
        line = raw.strip()
        if line and not _FENCE_LINE.match(line):
            return _LABEL.sub("", line).strip().strip("`").strip()
    return ""


def read_answer(line: str) -> dict[str, object]:
    """The answer's value per aspect (None where it matches none) and its items."""
    s = line
    ending = None
    if s.endswith("!!"):
        ending, s = "bang", s[:-2].rstrip()
    elif s.endswith("."):
        ending, s = "period", s[:-1].rstrip()
    separator = "pipe" if " | " in s else "semi" if " ; " in s else None
    items = [p.strip() for p in re.split(r"[;|,]", s) if p.strip()]
    joined = {"pipe": " | ", "semi": " ; "}.get(separator or "")
    if joined is not None and s != joined.join(items):
        separator = None
    case = "lower" if all(i == i.lower() for i in items) else "upper" if all(i == i.upper() for i in items) else None
    return {"case": case, "separator": separator, "ending": ending, "items": items}


def score(example: dict, output: str) -> dict:
    """Fraction of the four aspects the answer line gets right, with a feedback sentence for each miss."""
    got = read_answer(answer_line(output if isinstance(output, str) else ""))
    items = [str(i) for i in got["items"]]  # type: ignore[union-attr]
    if sorted(i.lower() for i in items) != sorted(i.lower() for i in example["items"]):
        return {"score": 0.0, "feedback": "The answer must list exactly the given items, each once."}
    want = expected(example)
    low = [i.lower() for i in items]
    order = "given" if low == [i.lower() for i in example["items"]] else "alpha" if low == sorted(low) else None
    if low == sorted(low) == [i.lower() for i in example["items"]]:
        order = want["order"]  # the given order is already sorted: both readings hold
    values = {"case": got["case"], "order": order, "separator": got["separator"], "ending": got["ending"]}
    failed = [a for a in ASPECTS if values[a] != want[a]]
    return {"score": 1.0 - len(failed) / len(ASPECTS),
            "feedback": " ".join(f"{FEEDBACK_TAG} {_FEEDBACK[(a, want[a])]}." for a in failed) or "Correct."}
