"""What the simulated model says: dispatch a chat request to a behaviour by stage and content.

The visible reply is short (a reasoning line plus the answer); the hidden reasoning of a
thinking model is accounted for only in ``usage.completion_tokens`` (see serving.py).
"""

from __future__ import annotations

import random
import re

from engine.llm.sim import program_model, stale_model
from engine.llm.sim.ruleworld_model import answer_example, reflect
from engine.tasks.ruleworld import parse_input

_FENCE = re.compile(r"```([^\n]*)\n(.*?)```", re.S)
_GENERIC_NOTES = (
    "Be precise and follow the required format exactly.",
    "Check the answer against every instruction before replying.",
    "Keep the answer short and on one line.",
)
_GENERIC_ANSWERS = (
    "Here is a concise answer that follows the instructions.",
    "The answer, following the given instructions, is above.",
    "Done: the request has been handled as instructed.",
)


def message_text(content: object) -> str:
    """Text of a message content (a string or a list of OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _rework(user: str, rng: random.Random) -> str:
    """Generic proposal: the request's first fenced block back, lightly changed."""
    m = _FENCE.search(user)
    if not m:
        return rng.choice(_GENERIC_ANSWERS)
    lang, body = m.group(1).strip(), m.group(2).rstrip("\n")
    looks_like_code = lang not in ("", "text", "txt", "markdown", "md") or re.search(
        r"^\s*(def |class |import |from \S+ import )", body, re.M)
    note = rng.choice(_GENERIC_NOTES)
    extra = f"# {note}" if looks_like_code else note
    return f"Reasoning: the feedback gives no specific fix, so I only tightened the wording.\n```{lang}\n{body}\n{extra}\n```"


def answer(messages: list[dict], stage: str, rng: random.Random) -> str:
    """The visible content of the reply to ``messages`` sent for ``stage``."""
    system = "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "system")
    users = [message_text(m.get("content")) for m in messages if m.get("role") == "user"]
    user = users[-1] if users else ""
    if stage in ("propose", "default") and program_model.patch_format(system):
        return program_model.propose(messages, message_text, rng)
    if stage == "reflect":
        return stale_model.judge(user, rng) or "VERDICT: keep\nREASON: no conflict with the pool changes found"
    if stage == "propose" or (stage not in ("rollout", "evaluate") and "```" in user and "Feedback:" in user):
        return reflect(user, rng) or _rework(user, rng)
    example = parse_input(user)
    if example is not None:
        return answer_example(system or user, example, rng)
    return rng.choice(_GENERIC_ANSWERS)


def truncate(text: str) -> str:
    """Visible text of a reply cut by max_tokens: no closing fence, so no parsable proposal."""
    idx = text.rfind("```")
    if text.count("```") >= 2:
        text = text[:idx]
    return text[: max(0, int(len(text) * 0.6))]
