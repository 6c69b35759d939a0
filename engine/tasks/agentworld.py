"""The agent-tools world: a shop agent with two tools and a rounding tool function.

An order ("Order: 3 x lamp" / "Pay in: EUR") is answered with its total in the customer's
currency. The agent is four evolvable components (tasks/agent_tools/task.toml) and one frozen:

    system       the agent's system prompt          owns: format, quantity
    tool_lookup  description of lookup(item)        owns: cents
    tool_convert description of convert(amount, c)  owns: direction
    round_total  a Python tool function (its text)  owns: rounding

Five checks, each owned by one component (ASPECT_OWNER). The metric (`score`) diagnoses an
answer: it finds which combination of the four computational mistakes (unit price instead of
price x quantity; cents read as dollars; the rate applied the wrong way; the total rounded
otherwise than to cents) reproduces the stated amount, and names each mistake with the
component responsible, so feedback implicates components by name (what `blame` selection
reads). The score is the share of the five checks met.

`round_total` is never executed: `rounding_of` reads its source with `ast` and recognises the
return expression (round to N places, truncation, none), which is all the metric and the
simulated agent need (engine/llm/sim/README.md, "The agent-tools task's plug-in").
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from dataclasses import dataclass

CATALOGUE_CENTS = {"lamp": 1395, "kettle": 2450, "mug": 675, "chair": 4999, "desk": 12905, "pen": 125,
                   "notebook": 345, "clock": 1875, "blanket": 3260, "teapot": 2115}
"""Unit prices in US cents (what lookup returns)."""
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "CHF": 0.88, "CAD": 1.36}
"""Units of the currency per US dollar (what convert multiplies by)."""

ASPECTS = ("format", "quantity", "cents", "direction", "rounding")
ASPECT_OWNER = {"format": "system", "quantity": "system", "cents": "tool_lookup", "direction": "tool_convert",
                "rounding": "round_total"}

_ORDER = re.compile(r"^Order: (\d+) x ([a-z]+)\s*$", re.M)
_PAY = re.compile(r"^Pay in: ([A-Z]{3})\s*$", re.M)
TOTAL_LINE = re.compile(r"^TOTAL: (-?\d+(?:\.\d+)?) ([A-Z]{3})\s*$", re.M)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_order(text: str) -> dict | None:
    """{"qty", "item", "currency"} of an order message, or None if the text holds none."""
    order, pay = _ORDER.search(text or ""), _PAY.search(text or "")
    if order is None or pay is None or order.group(2) not in CATALOGUE_CENTS or pay.group(1) not in RATES:
        return None
    return {"qty": int(order.group(1)), "item": order.group(2), "currency": pay.group(1)}


# -- the rounding tool ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Rounding:
    """What round_total does: "round" to `places`, "truncate" to a whole number, or "none"."""
    kind: str
    places: int = 0

    def apply(self, x: float) -> float:
        if self.kind == "round":
            return round(x, self.places)
        if self.kind == "truncate":
            return float(math.trunc(x))
        return x

    @property
    def cents(self) -> bool:
        return self.kind == "round" and self.places == 2


NO_ROUNDING = Rounding("none")


def rounding_of(source: str) -> Rounding:
    """The behaviour of `def round_total(x)` in `source`, read from its return statement without
    running it: round(x, N) / round(x) / int(x), math.floor(x) or math.trunc(x) / x; anything
    else (no such function, a syntax error, other code) counts as no rounding."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return NO_ROUNDING
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "round_total"), None)
    if fn is None or not fn.args.args:
        return NO_ROUNDING
    arg = fn.args.args[0].arg
    ret = next((n for n in fn.body if isinstance(n, ast.Return)), None)
    value = ret.value if ret is not None else None
    if isinstance(value, ast.Name) and value.id == arg:
        return NO_ROUNDING
    if not isinstance(value, ast.Call) or not value.args or not _is_name(value.args[0], arg):
        return NO_ROUNDING
    callee = ast.unparse(value.func)
    if callee == "round":
        if len(value.args) == 1:
            return Rounding("round", 0)
        places = value.args[1]
        if isinstance(places, ast.Constant) and isinstance(places.value, int) and 0 <= places.value <= 6:
            return Rounding("round", places.value)
        return NO_ROUNDING
    if callee in ("int", "math.floor", "math.trunc", "floor", "trunc"):
        return Rounding("truncate")
    return NO_ROUNDING


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


# -- the arithmetic and its mistakes -------------------------------------------------------------
def compute(order: dict, *, quantity: bool, cents: bool, direction: bool, rounding: Rounding) -> float:
    """The total an agent states given which steps it gets right."""
    price = CATALOGUE_CENTS[order["item"]] / (100.0 if cents else 1.0)
    total = price * (order["qty"] if quantity else 1)
    rate = RATES[order["currency"]]
    total = total * rate if direction else total / rate
    return rounding.apply(total)


def correct_total(order: dict) -> float:
    return compute(order, quantity=True, cents=True, direction=True, rounding=Rounding("round", 2))


_WRONG_ROUNDINGS = (Rounding("truncate"), Rounding("round", 0), Rounding("round", 1), NO_ROUNDING)


def diagnose(order: dict, amount: float) -> set[str] | None:
    """The fewest mistakes (aspect names) that reproduce `amount`, or None if none does."""
    best: set[str] | None = None
    for q, c, d in itertools.product((True, False), repeat=3):
        for r in (Rounding("round", 2), *_WRONG_ROUNDINGS):
            if abs(compute(order, quantity=q, cents=c, direction=d, rounding=r) - amount) > 0.0051:
                continue
            wrong = {a for a, ok in (("quantity", q), ("cents", c), ("direction", d), ("rounding", r.cents)) if not ok}
            if order["currency"] == "USD":
                wrong.discard("direction")  # no conversion: the direction cannot be wrong
            if best is None or len(wrong) < len(best):
                best = wrong
    return best


FEEDBACK = {
    "format": "No `TOTAL: <amount> <currency>` line: the system prompt (component system) must ask for the "
              "answer in that form.",
    "quantity": "The total is the price of one item, not of the {qty} ordered: the system prompt (component "
                "system) must say to multiply the unit price by the quantity.",
    "cents": "The total is 100 times too large: lookup returns prices in cents, which the lookup tool's "
             "description (component tool_lookup) does not say.",
    "direction": "The conversion went the wrong way (USD per {currency} instead of {currency} per USD): the "
                 "convert tool's description (component tool_convert) must say it converts from USD into the "
                 "target currency.",
    "rounding": "The amount {amount} is not rounded to cents: the tool function round_total (component "
                "round_total) must round to 2 decimal places.",
    "unknown": "The amount {amount} matches no computation of this order (expected a total from "
               "lookup, the quantity, convert and round_total).",
}


def score(example: dict, output: str) -> dict:
    """{"score": share of the five checks met, "feedback": each failed check, naming its component}."""
    order = {"qty": int(example["qty"]), "item": example["item"], "currency": example["currency"]}
    failed: list[str] = []
    line = TOTAL_LINE.search(output or "")
    if line is None or line.group(2) != order["currency"]:
        failed.append("format")
    raw = line.group(1) if line is not None else next(iter(_NUMBER.findall(output or "")), None)
    amount = float(raw) if raw is not None else None
    mistakes = diagnose(order, amount) if amount is not None else None
    notes = [FEEDBACK["format"]] if failed else []
    if mistakes is None:
        failed.extend(("quantity", "cents", "direction", "rounding"))
        notes.append(FEEDBACK["unknown"].format(amount=raw if raw is not None else "(none)"))
    else:
        for aspect in ("quantity", "cents", "direction", "rounding"):
            if aspect in mistakes:
                failed.append(aspect)
                notes.append(FEEDBACK[aspect].format(qty=order["qty"], currency=order["currency"], amount=raw))
    value = (len(ASPECTS) - len(failed)) / len(ASPECTS)
    return {"score": value, "feedback": " ".join(notes) if notes else "Correct total in the required form."}


def aspects_in_feedback(text: str) -> list[str]:
    """Aspects a feedback text reports as failed, by the component and the mistake it names."""
    found = []
    low = text.lower()
    if "total: <amount>" in low:
        found.append("format")
    if "multiply the unit price" in low:
        found.append("quantity")
    if "in cents" in low and "tool_lookup" in low:
        found.append("cents")
    if "wrong way" in low:
        found.append("direction")
    if "not rounded to cents" in low:
        found.append("rounding")
    return found
