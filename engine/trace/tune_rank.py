"""The optional LLM ranking of `evotui tune`'s knobs (one call, temperature 0; EvoTrace B.9).

The candidates found with tree-sitter (engine/trace/knobs.py) are listed for the model, which
picks at most 8 and may give each an interval. The answer is read in any reasonable format: a
JSON object with a list under any key ("hparams", "knobs", ...), a bare JSON list (of objects
or of names), in a fenced block or not, or plain text naming the knobs (numbered or bulleted
lines, ranges written "low .. high" or "[low, high]"). Names that are not candidates are
ignored; an answer naming none of them leaves the heuristic order (and says so).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

from engine.trace.knobs import MAX_KNOBS, Knob

MARKER = "evotui-knob-ranking:"
SYSTEM = f"""{MARKER} rank numeric knobs for Bayesian-optimisation tuning
You are an expert at identifying tunable hyperparameters in heuristic optimisation code.
Below are a program and the numeric literals found in it, one per line as
"- NAME = LITERAL  (line L: CODE)". Pick at most {MAX_KNOBS} that are good tuning candidates
(tolerances, iteration or sample budgets, step sizes, penalty weights, cooling rates, geometric
spacings and offsets), most promising first. Skip problem constants, identities, array shapes
and flags. For each give name, low, high, scale ("linear" or "log") and kind ("int" or "float").
Return ONLY a JSON object: {{"hparams": [{{"name": ..., "low": ..., "high": ..., "scale": ..., "kind": ...}}]}}"""


def messages(source: str, knobs: list[Knob], fence: str = "python") -> list[dict[str, str]]:
    lines = source.splitlines()
    listed = "\n".join(f"- {k.name} = {k.literal}  (line {k.line}: {lines[k.line - 1].strip()[:120]})" for k in knobs)
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"```{fence}\n{source}\n```\n\nCandidate knobs:\n{listed}\n"}]


def _json_values(text: str) -> list[Any]:
    """Every JSON value that starts at a '{' or '[' of text and parses."""
    dec, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = dec.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            out.append(value)
            i = end
        else:
            i += 1
    return out


def _entries(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for v in value.values():
            if isinstance(v, list):
                return v
        if "name" in value:
            return [value]
    return None


_RANGE = re.compile(r"[\[(]?\s*([-+]?\d[\d.eE+-]*)\s*(?:\.\.|,|to|-)\s*([-+]?\d[\d.eE+-]*)\s*[\])]?")


def _number(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def parse(text: str, candidates: list[Knob]) -> list[dict[str, Any]]:
    """[{"name", optional "low"/"high"/"scale"}] in the answer's order, candidates only."""
    names = {k.name for k in candidates}
    picked: list[dict[str, Any]] = []
    for value in _json_values(text):
        entries = _entries(value)
        if not entries:
            continue
        for e in entries:
            spec = {"name": e} if isinstance(e, str) else dict(e) if isinstance(e, dict) else None
            if spec and spec.get("name") in names and all(p["name"] != spec["name"] for p in picked):
                picked.append(spec)
        if picked:
            return picked
    # Plain text: knob names in the order they appear, with a range on the same line if any.
    for line in text.splitlines():
        for name in re.findall(r"[A-Za-z_]\w*", line):
            if name in names and all(p["name"] != name for p in picked):
                spec: dict[str, Any] = {"name": name}
                rest = line.split(name, 1)[1]
                m = _RANGE.search(rest)
                if m:
                    spec.update(low=m.group(1), high=m.group(2))
                if re.search(r"\blog\b", rest):
                    spec["scale"] = "log"
                elif re.search(r"\blinear\b", rest):
                    spec["scale"] = "linear"
                picked.append(spec)
                break
    return picked


def apply(candidates: list[Knob], picked: list[dict[str, Any]], limit: int = MAX_KNOBS) -> list[Knob]:
    """The picked knobs in the model's order with its intervals where they are usable (low < high,
    the default inside, a log scale only over positive bounds; integers rounded)."""
    by_name = {k.name: k for k in candidates}
    out: list[Knob] = []
    for spec in picked[:limit]:
        k = by_name[spec["name"]]
        lo, hi = _number(spec.get("low")), _number(spec.get("high"))
        if lo is not None and hi is not None and lo < hi and lo <= k.default <= hi:
            log = str(spec.get("scale", "log" if k.log else "linear")).lower() == "log" and lo > 0
            if k.kind == "int":
                lo, hi = float(max(1, math.floor(lo))), float(math.ceil(hi))
                log = log and lo >= 1
            if lo < hi:
                k = replace(k, low=lo, high=hi, log=log)
        out.append(k)
    return out
