"""The rule world behind the built-in ``rules`` task.

Each example asks for a list of items written on one line. Ten hidden house rules decide the
format; most apply only to some examples (a category, a priority, an audience, a list size).
``score`` checks the applicable rules on the last non-empty line of any output, so a real LLM's
answer is scored exactly like the simulated model's. Each rule also carries the sentences the
simulator's plug-in (ruleworld_sim.py) needs: the canonical statement, paraphrases, a
conflicting wrong variant, the feedback sentence, and keyword patterns that recognise a rule
stated in other words.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Callable, Literal, Mapping

Status = Literal["none", "right", "wrong", "both"]

CATEGORIES: dict[str, tuple[str, ...]] = {
    "fruit": ("apple", "banana", "cherry", "date", "fig", "grape", "kiwi", "lemon", "mango",
              "melon", "orange", "peach", "pear", "plum", "lime", "papaya", "apricot"),
    "vegetable": ("carrot", "onion", "leek", "potato", "pepper", "celery", "spinach", "cabbage",
                  "radish", "turnip", "pea", "beet", "kale", "garlic", "lettuce"),
    "tool": ("hammer", "saw", "wrench", "drill", "chisel", "pliers", "file", "level", "clamp",
             "screwdriver", "mallet", "rasp", "sander", "trowel"),
    "animal": ("cat", "dog", "horse", "otter", "zebra", "lion", "tiger", "eagle", "beaver",
               "rabbit", "camel", "wolf", "fox", "panda", "moose"),
    "color": ("red", "blue", "green", "yellow", "purple", "black", "white", "teal", "indigo",
              "violet", "crimson", "beige", "cyan", "magenta", "gold", "amber"),
}


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer line of an output, taken apart."""

    line: str
    star: bool          # starts with "* "
    star_end: bool      # ends with "*"
    bang: bool          # ends with "!!"
    bang_front: bool    # starts with "!!"
    count_prefix: int | None
    count_suffix: int | None
    bracket: str | None  # "square" | "round" | None
    items: tuple[str, ...]
    sep_ok: bool        # items joined by exactly " ; "


_FENCE_LINE = re.compile(r"^`{3,}\w*$")
_LABEL = re.compile(r"^(?:final answer|answer|output)\s*:\s*", re.I)
_SPLIT = re.compile(r"[;,/|]")


def answer_line(output: str) -> str:
    """Last non-empty line that is not a code fence (a real LLM may add prose before it)."""
    for raw in reversed(output.splitlines()):
        line = raw.strip()
        if line and not _FENCE_LINE.match(line):
            return line
    return ""


def parse_answer(output: str) -> Answer:
    line = answer_line(output)
    s = _LABEL.sub("", line).strip().strip("`").strip()
    if s.endswith(".") and not s.endswith(".."):
        s = s[:-1].rstrip()
    star = bang_front = star_end = bang = False
    for _ in range(2):  # markers may be stacked, e.g. "!! * ..."
        if s.startswith("* "):
            star, s = True, s[2:].lstrip()
        if s.startswith("!!"):
            bang_front, s = True, s[2:].lstrip()
    for _ in range(2):
        if s.endswith("!!"):
            bang, s = True, s[:-2].rstrip()
        if s.endswith("*"):
            star_end, s = True, s[:-1].rstrip()
    count_suffix = count_prefix = None
    m = re.search(r"\s*\((\d+)\)$", s)
    if m:
        count_suffix, s = int(m.group(1)), s[: m.start()]
    m = re.match(r"(\d+)\s*:\s*", s)
    if m:
        count_prefix, s = int(m.group(1)), s[m.end():]
    bracket = None
    if s.startswith("[") and s.endswith("]"):
        bracket, s = "square", s[1:-1].strip()
    elif s.startswith("(") and s.endswith(")"):
        bracket, s = "round", s[1:-1].strip()
    parts = [p.strip() for p in _SPLIT.split(s)]
    items = tuple(p.strip("\"'`*_ ") for p in parts if p.strip("\"'`*_ "))
    sep_ok = s == " ; ".join(parts)
    return Answer(line, star, star_end, bang, bang_front, count_prefix, count_suffix, bracket,
                  items, sep_ok)


def distinct(items: list[str] | tuple[str, ...]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item.lower() not in seen:
            seen.add(item.lower())
            out.append(item)
    return out


@dataclass(frozen=True)
class Rule:
    id: str
    statement: str
    paraphrases: tuple[str, ...]
    wrong: str
    feedback: str
    topic: re.Pattern[str]
    right_re: re.Pattern[str]
    wrong_re: re.Pattern[str]
    applies: Callable[[dict], bool]
    check: Callable[[Answer, dict], bool]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


def _cat(name: str) -> Callable[[dict], bool]:
    return lambda ex: ex["category"] == name


def _sorted_ok(a: Answer, _: dict) -> bool:
    low = [i.lower() for i in a.items]
    return low == sorted(low)


def _len_ok(a: Answer, _: dict) -> bool:
    return all(len(x) <= len(y) for x, y in zip(a.items, a.items[1:]))


def _count_ok(a: Answer, ex: dict) -> bool:
    return a.count_prefix is not None and a.count_prefix in (len(a.items), len(distinct(ex["items"])))


RULES: tuple[Rule, ...] = (
    Rule("separator", "Join the items with ' ; ' (a semicolon with a space on each side).",
         ("Put ' ; ' between consecutive items.",),
         "Separate the items with a slash ' / '.",
         "Items must be separated by ' ; ' (a semicolon with a space on each side).",
         _rx(r"separat|\bjoin|between|delimit|split"),
         _rx(r"semi-?colon|['\"`]\s?;\s?['\"`]"), _rx(r"slash|['\"`]\s?/\s?['\"`]"),
         lambda ex: True, lambda a, ex: len(a.items) < 2 or a.sep_ok),
    Rule("dedupe", "Remove duplicate items so each item appears only once.",
         ("Never list the same item twice.",),
         "Keep duplicate items; list every occurrence.",
         "The list repeated an item; each item should appear only once.",
         _rx(r"duplicat|repeat|twice|more than once|\bonce\b|unique|distinct"),
         _rx(r"remov|drop|delet|eliminat|omit|without|\bno\b|\bnever\b|dedup|de-dup|only once|"
             r"unique|distinct|not repeat"),
         _rx(r"\bkeep\b[^.]*(duplicat|repeat)|every occurrence|allow (duplicat|repeat)|"
             r"(duplicat|repeat)\w* (items )?(are|is) (fine|allowed|ok)"),
         lambda ex: len(distinct(ex["items"])) < len(ex["items"]),
         lambda a, ex: len({i.lower() for i in a.items}) == len(a.items)),
    Rule("count_prefix",
         "When the list has more than 4 items, start the line with the item count and a colon, like '5: '.",
         ("Prefix lists longer than four items with their count, e.g. '6: '.",),
         "When the list has more than 4 items, put the item count at the end in parentheses, like '(5)'.",
         "Lists with more than 4 items must start with the item count and a colon, e.g. '5: '.",
         _rx(r"\bcount\b|number of items|how many items|\btotal\b"),
         _rx(r"start|begin|prefix|front|before|colon|\d+: "),
         _rx(r"\bend\b|parenthes|suffix|\bafter\b|\(\d+\)"),
         lambda ex: len(distinct(ex["items"])) > 4, _count_ok),
    Rule("fruit_alpha", "Sort fruit lists alphabetically (A to Z).",
         ("Fruit names go in A-Z order.",),
         "Sort fruit lists in reverse alphabetical order (Z to A).",
         "Fruit items were not in alphabetical order (A to Z).",
         _rx(r"fruit"),
         _rx(r"alphabet|a to z|a-z|a→z|dictionary order|lexicograph|ascending"),
         _rx(r"revers|z to a|z-a|z→a|descend|backward"),
         _cat("fruit"), _sorted_ok),
    Rule("veg_upper", "Write vegetable names in UPPERCASE.",
         ("Vegetables are written in all caps.",),
         "Write vegetable names in lowercase.",
         "Vegetable names must be written in uppercase letters.",
         _rx(r"vegetable|veggie"),
         _rx(r"upper|all caps|all capital|capital letters|block capitals"),
         _rx(r"lower|small letters"),
         _cat("vegetable"), lambda a, ex: all(i == i.upper() for i in a.items)),
    Rule("tool_brackets", "Wrap tool lists in square brackets.",
         ("Put tool lists inside [ and ].",),
         "Wrap tool lists in parentheses.",
         "Tool lists must be enclosed in square brackets.",
         _rx(r"\btools?\b"),
         _rx(r"square|bracket|\["),
         _rx(r"parenthes|round bracket|\(\s*\)|curly|brace"),
         _cat("tool"), lambda a, ex: a.bracket == "square"),
    Rule("animal_title", "Capitalize the first letter of each animal name (Title Case).",
         ("Animal names start with a capital letter.",),
         "Write animal names entirely in uppercase.",
         "Each animal name must start with a capital letter (Title Case).",
         _rx(r"animal"),
         _rx(r"capitali|title case|title-case|first letter|initial|leading capital|capital letter"),
         _rx(r"all caps|all upper|entirely in upper|fully upper|every letter|\ball uppercase"),
         _cat("animal"), lambda a, ex: all(i == i.capitalize() for i in a.items)),
    Rule("color_length", "Order color lists by word length, shortest first.",
         ("List colors from the shortest name to the longest.",),
         "Order color lists by word length, longest first.",
         "Colors must be ordered from the shortest word to the longest.",
         _rx(r"colou?r"),
         _rx(r"shortest|short to long|length|number of letters|fewest letters|ascending"),
         _rx(r"longest first|long to short|longest to shortest|decreasing length|descending"),
         _cat("color"), _len_ok),
    Rule("priority_bang", "When the priority is high, end the line with ' !!'.",
         ("High-priority lists end with ' !!'.",),
         "When the priority is high, start the line with '!!'.",
         "High-priority answers must end with ' !!'.",
         _rx(r"priority|urgent"),
         _rx(r"!!|exclamation|\bend|suffix|\bafter\b|bang"),
         _rx(r"\bstart|\bbegin|prefix|\bfront|before"),
         lambda ex: ex["priority"] == "high", lambda a, ex: a.bang),
    Rule("kids_star", "When the audience is kids, start the line with '* ' (a star and a space).",
         ("For kids, begin the answer with an asterisk and a space.",),
         "When the audience is kids, end the line with a star.",
         "Answers for a kids audience must start with '* '.",
         _rx(r"\bkids?\b|\bchild|audience"),
         _rx(r"star|asterisk|\*|begin|prefix"),
         _rx(r"\bend\b|suffix|\bafter\b|finish"),
         lambda ex: ex["audience"] == "kids", lambda a, ex: a.star),
)
RULE_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}

_SENTENCE_SPLIT = re.compile(r"\n|(?<=[.!?])\s+(?=[A-Z])")


def classify(sentence: str) -> list[tuple[str, str]]:
    """Rules a sentence states, each as (rule id, "right" | "wrong")."""
    found = []
    for rule in RULES:
        if rule.topic.search(sentence):
            if rule.wrong_re.search(sentence):
                found.append((rule.id, "wrong"))
            elif rule.right_re.search(sentence):
                found.append((rule.id, "right"))
    return found


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s.strip()]


@lru_cache(maxsize=4096)
def prompt_status(text: str) -> Mapping[str, Status]:
    """How each rule is stated in a prompt; cached (read-only) because rollouts reuse prompts."""
    seen: dict[str, set[str]] = {}
    for sentence in sentences(text):
        for rid, kind in classify(sentence):
            seen.setdefault(rid, set()).add(kind)
    out: dict[str, Status] = {}
    for rule in RULES:
        kinds = seen.get(rule.id, set())
        out[rule.id] = "both" if len(kinds) == 2 else ("right" if "right" in kinds else
                                                      "wrong" if "wrong" in kinds else "none")
    return MappingProxyType(out)


def format_input(category: str, items: list[str], priority: str, audience: str) -> str:
    return (f"Category: {category}\nItems: {', '.join(items)}\nPriority: {priority}\n"
            f"Audience: {audience}\nWrite the formatted list on one line.")


_INPUT_RE = re.compile(r"Category:\s*(\w+)\s*\n\s*Items:\s*([^\n]*)(?:\n\s*Priority:\s*(\w+))?"
                       r"(?:\s*\n\s*Audience:\s*(\w+))?", re.I)


def parse_input(text: str) -> dict | None:
    """Read an example back from its input text (the simulated model only sees text)."""
    m = _INPUT_RE.search(text)
    if not m:
        return None
    items = [i.strip() for i in m.group(2).split(",") if i.strip()]
    if not items:
        return None
    return {"category": m.group(1).lower(), "items": items,
            "priority": (m.group(3) or "normal").lower(), "audience": (m.group(4) or "adults").lower()}


def _brief(words: list[str]) -> str:
    return ", ".join(w[:30] for w in words[:5]) or "none"


def score(example: dict, output: str) -> dict:
    """Fraction of applicable rules the answer line satisfies, with feedback sentences."""
    ans = parse_answer(output if isinstance(output, str) else "")
    expected = {i.lower() for i in example["items"]}
    got = {i.lower() for i in ans.items}
    if got != expected:
        return {"score": 0.0,
                "feedback": (f"The answer must list exactly the given items (missing: "
                             f"{_brief(sorted(expected - got))}; unexpected: {_brief(sorted(got - expected))}).")}
    applicable = [r for r in RULES if r.applies(example)]
    failed = [r for r in applicable if not r.check(ans, example)]
    value = 1.0 - len(failed) / len(applicable)
    return {"score": value, "feedback": " ".join(r.feedback for r in failed) or "Correct."}


def generate_examples(seed: int, n: int, prefix: str) -> list[dict]:
    """n examples with ids ``{prefix}-000``...; the same seed gives the same examples."""
    rng = random.Random(seed)
    names = sorted(CATEGORIES)
    out: list[dict] = []
    block: list[str] = []
    for k in range(n):
        if k % len(names) == 0:  # every category equally often, in shuffled blocks
            block = rng.sample(names, len(names))
        category = block[k % len(names)]
        items = rng.sample(CATEGORIES[category], rng.randint(2, 7))
        if rng.random() < 0.5:
            items += rng.sample(items, rng.randint(1, min(2, len(items))))
        rng.shuffle(items)
        priority = "high" if rng.random() < 0.35 else "normal"
        audience = "kids" if rng.random() < 0.35 else "adults"
        out.append({"id": f"{prefix}-{k:03d}", "input": format_input(category, items, priority, audience),
                    "category": category, "items": items, "priority": priority, "audience": audience})
    return out
