"""The adapter protocol's edges: what GEPA-style adapters must return (checked, with errors that
say what is wrong), the reflection prompt built from their reflective records, and how their
outputs are shown in traces."""

from __future__ import annotations

import json
import math
from numbers import Real
from typing import Any, Mapping

from engine import components
from engine.context import FatalRunError
from engine.stages import reflection

SHOWN_CHARS = 300
"""Most characters of an adapter output kept in a trace (the TUI and strategy stages read them)."""


class AdapterError(FatalRunError):
    """The adapter broke its protocol; the message says how (exit code 2: bad input)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


def check_batch(result: Any, n: int, capture: bool) -> tuple[list, list[float], list | None]:
    """(outputs, scores, trajectories) of an EvaluationBatch-like result for `n` examples, or
    AdapterError saying what is wrong with it."""
    get = result.get if isinstance(result, Mapping) else lambda key: getattr(result, key, None)
    outputs, scores, trajectories = get("outputs"), get("scores"), get("trajectories")
    if scores is None or outputs is None:
        raise AdapterError(f"adapter.evaluate returned {type(result).__name__} without outputs and scores; "
                           "return an EvaluationBatch(outputs, scores, trajectories)")
    outputs, scores = list(outputs), list(scores)
    if len(outputs) != n or len(scores) != n:
        raise AdapterError(f"adapter.evaluate returned {len(outputs)} outputs and {len(scores)} scores for a batch "
                           f"of {n} examples; return one of each per example")
    for k, s in enumerate(scores):
        if isinstance(s, bool) or not isinstance(s, Real):
            raise AdapterError(f"adapter.evaluate returned a non-numeric score {s!r} (example {k} of the batch); "
                               "return numbers")
        if not math.isfinite(float(s)):
            raise AdapterError(f"adapter.evaluate returned a non-finite score {s!r} (example {k} of the batch)")
    if trajectories is not None:
        trajectories = list(trajectories)
        if len(trajectories) != n:
            raise AdapterError(f"adapter.evaluate returned {len(trajectories)} trajectories for a batch of {n} examples")
    elif capture:
        raise AdapterError("adapter.evaluate(capture_traces=True) returned no trajectories")
    return outputs, [float(s) for s in scores], trajectories


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=1, default=str, ensure_ascii=False)


def build_messages(description: str, parts: components.Components, target: str, records: list[dict]) -> list[dict]:
    """The reflection prompt for one component, from the adapter's reflective records (GEPA's
    "Inputs" / "Generated Outputs" / "Feedback" dicts, or any keys). The contract of
    engine/stages/reflection.py: the target's current text is the first ``` block, each record's
    feedback is on a `Feedback:` line, and the answer is the new text in one ``` block. The other
    components come first, quoted, as read-only context."""
    out = [f"Task: {description}\n"] if description else []
    others = [c for c in parts if c.name != target]
    if others:
        out.append("The system is configured by named text components; only one changes now.\n")
        out.append("## Other components (context only: they stay as they are)")
        out.extend(f"### [{c.name}]\n" + ("\n".join(f"> {ln}" for ln in c.text.strip().splitlines()) or ">") + "\n"
                   for c in others)
    current = next(c.text for c in parts if c.name == target)
    out.append(f"## Current text of component [{target}]\n```\n{current.strip()}\n```\n")
    out.append("## Examples")
    for n, record in enumerate(records, start=1):
        feedback = next((_value(v) for k, v in record.items() if str(k).lower() == "feedback"), "none")
        shown = [f"{k}:\n{_value(v)}" for k, v in record.items() if str(k).lower() != "feedback"]
        out.append(f"### Example {n}\n" + "\n".join(shown) + f"\nFeedback: {feedback or 'none'}\n")
    out.append(f"Write the complete improved text of component [{target}] (without its heading) inside a single "
               "``` block.")
    return [{"role": "system", "content": reflection.SYSTEM}, {"role": "user", "content": "\n".join(out)}]


def shown(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."
