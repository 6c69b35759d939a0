"""The simulator's generic answers to the two TextGrad calls (engine/stages/textgrad.py).

Read by content only, like every simulated answer: both system messages start with a marker line
(MARKER ...). A task plug-in may answer them first (the agent task's does,
engine/tasks/agentworld_textgrad_sim.py); a task's reflector must decline them (a reflector would
answer a gradient request with a rewrite). What is left gets these answers:

- gradient: a critique quoting the distinct feedback of the request's examples scored below 1,
  most frequent first (at most MAX_POINTS), one `- N example(s): FEEDBACK` line each; no rewrite;
- apply: the component (the first ``` block) with each critique point's feedback appended as a
  line it does not hold yet: it follows the critique and nothing else (it never sees traces).

No randomness: a generic model here is a plain reader, and the answer is reproducible.
"""

from __future__ import annotations

import re
from collections import Counter

from engine.llm.sim.feedback import feedback_texts
from engine.llm.sim.plugins import SimRequest

MARKER = "evotui-textgrad:"
"""Start of both marker lines; engine/stages/textgrad.py writes them (a test keeps the two equal)."""
MAX_POINTS = 5
"""Most critique points the generic gradient writes."""
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
_SCORED = re.compile(r"^Score: ([0-9.]+)[ \t]*\nFeedback:[ \t]*(.*)$", re.M)
_POINT = re.compile(r"^> - \d+ example\(s\): (.+)$", re.M)


def is_textgrad(request: SimRequest) -> bool:
    """Whether the request is one of textgrad's two calls (a reflector should decline it)."""
    return MARKER in request.system


def _failing_feedback(user: str, start: int) -> list[str]:
    """Feedback of the examples scored below 1 (a full score's "Correct." names no problem);
    every feedback item when the request has no `Score:` lines in evotui's layout."""
    scored = _SCORED.findall(user, start)
    texts = [fb for score, fb in scored if float(score) < 1.0] if scored else feedback_texts(user, start)
    return [t.strip() for t in texts if t.strip() and t.strip().lower() != "none"]


def critique(user: str) -> str:
    first = _FENCE.search(user)
    counts = Counter(_failing_feedback(user, first.end() if first is not None else 0))
    points = [f"- {n} example(s): {text}" for text, n in counts.most_common(MAX_POINTS)]
    return "Critique:\n" + ("\n".join(points) if points else "- No feedback names a problem with this component.")


def apply(user: str) -> str | None:
    first = _FENCE.search(user)
    if first is None or "## Critique" not in user:
        return None
    text = first.group(1).strip("\n")
    added = [p.strip() for p in _POINT.findall(user.split("## Critique", 1)[1]) if p.strip() not in text]
    new = "\n".join([text.rstrip(), *dict.fromkeys(added)]) if added else text
    note = f"added {len(added)} point(s) of the critique" if added else "the critique names nothing to add"
    return f"Reasoning: {note}.\n```\n{new}\n```"


def answer(request: SimRequest) -> str | None:
    """The generic answer to a textgrad request, or None when it is not one."""
    if not is_textgrad(request):
        return None
    return critique(request.user) if f"{MARKER} gradient" in request.system else apply(request.user)
