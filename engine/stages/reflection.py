"""The reflection prompt (propose stage) and the parser of its answer.

Layout keeps the stable part first so prefix caches on the server can hit: the fixed system
message, then the task description, then the current instructions, then the traces.
Contract with any LLM (and the simulator): the current instructions are the first ``` block of
the user message, each trace has a `Feedback:` line, and the answer's new instructions are the
last complete ``` block of the reply.
"""

from __future__ import annotations

import re

SYSTEM = (
    "You improve the instructions given to an assistant. You are shown the current instructions, "
    "inputs the assistant received, its outputs, their scores and feedback on what went wrong. "
    "Infer the general rules behind the feedback and write improved instructions that state them "
    "clearly. Keep what already works."
)

_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)


def build_messages(task_description: str, current: str, traces: list[dict]) -> list[dict]:
    parts = []
    if task_description:
        parts.append(f"Task: {task_description}\n")
    parts.append("## Current instructions\n```\n" + current.strip() + "\n```\n")
    parts.append("## Examples")
    for n, tr in enumerate(traces, start=1):
        parts.append(
            f"### Example {n}\nInput:\n{tr['input']}\nOutput:\n{tr['output']}\n"
            f"Score: {tr['score']:.2f}\nFeedback: {tr['feedback'] or 'none'}\n"
        )
    parts.append("Write the complete improved instructions inside a single ``` block.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_instructions(reply: str) -> str | None:
    """The last complete fenced block, stripped; None if there is none or it is empty."""
    blocks = _FENCE.findall(reply or "")
    if not blocks:
        return None
    text = blocks[-1].strip()
    return text or None
