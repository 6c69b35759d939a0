"""What the simulated model says: read a chat request, then let task plug-ins or a generic behaviour answer.

The request's kind comes from the stage and the content (see plugins.py); task plug-ins are
asked first, in order, and the generic behaviours below answer whatever they decline. The
visible reply is short (a reasoning line plus the answer); the hidden reasoning of a thinking
model is accounted for only in ``usage.completion_tokens`` (see serving.py).
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from engine.llm.sim import edit_judge, pes_agents, program_model
from engine.llm.sim import context_agents, knob_ranker, program_review, reviser, tagged_program, textgrad_answers
from engine.llm.sim import program_repair_answers
from engine.llm.sim.feedback import has_feedback
from engine.llm.sim.plugins import Kind, SimBehaviour, SimRequest, message_text

__all__ = ["answer", "length_stage", "message_text", "read_request", "truncate"]

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
_KEEP = "VERDICT: keep\nREASON: no conflict with the pool changes found"


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


def read_request(messages: list[dict], stage: str) -> SimRequest:
    """The request as the simulated model reads it; its kind from the stage and content alone."""
    system = "\n".join(message_text(m.get("content")) for m in messages if m.get("role") == "system")
    users = [message_text(m.get("content")) for m in messages if m.get("role") == "user"]
    user = users[-1] if users else ""
    kind: Kind
    # execute_fix: LoongFlow's executor asking again after local checks (engine/stages/executor_fix.py).
    if stage in ("propose", "default", "execute_fix") and (program_model.request_format(system, user)
                                            or tagged_program.recognises(messages)):
        kind = "patch"
    elif stage == "reflect":
        kind = "judge"
    elif stage == "propose" or (stage not in ("rollout", "evaluate") and "```" in user and has_feedback(user)):
        kind = "propose"
    else:
        kind = "task"
    return SimRequest(messages=messages, stage=stage, kind=kind, system=system, user=user)


_LENGTHS_OF_KIND = {"patch": "propose", "propose": "propose", "judge": "reflect", "task": "rollout"}


def length_stage(messages: list[dict], stage: str) -> str:
    """Whose output lengths a request gets: its stage header's, or, without one (a peer's
    unchanged client), those of the stage its content implies, so a proposal is as long
    whoever asks for it."""
    if stage != "default":
        return stage
    return _LENGTHS_OF_KIND[read_request(messages, stage).kind]


def _generic(req: SimRequest, rng: random.Random) -> str:
    if req.kind == "patch" and tagged_program.recognises(req.messages):
        return tagged_program.answer(req.messages, rng)
    if req.kind == "patch":
        return program_model.propose(req.messages, message_text, rng)
    if req.kind == "judge":
        return _KEEP
    if req.kind == "propose" and textgrad_answers.is_textgrad(req):  # after the plug-ins: a task's may answer
        return textgrad_answers.answer(req) or _rework(req.user, rng)
    if req.kind == "propose":
        return _rework(req.user, rng)
    return rng.choice(_GENERIC_ANSWERS)


def answer(messages: list[dict], stage: str, rng: random.Random,
           behaviours: Sequence[SimBehaviour] = ()) -> str:
    """The visible content of the reply to ``messages`` sent for ``stage``."""
    req = read_request(messages, stage)
    if edit_judge.recognises(req):  # generic, by its marker line: no task prompt carries it
        return edit_judge.answer(req)
    if knob_ranker.recognises(req):  # generic, by its marker line: `evotui tune`'s knob ranking
        return knob_ranker.answer(req)
    if context_agents.recognises(req):  # generic, by the ContextEvolve agents' marker lines
        return context_agents.answer(req)
    if pes_agents.recognises(req):  # LoongFlow's planner/summarizer, by their marker lines
        return pes_agents.answer(req, rng)
    if reviser.recognises(req):  # the repair of a stale plan or guidance, by its marker line
        return reviser.answer(req)
    if program_repair_answers.recognises(req):  # the repair of a stale program proposal, by its marker line
        return program_repair_answers.answer(req)
    if req.kind in ("task", "propose") and program_review.recognises(req):  # novelty/meta review, by the format asked
        return program_review.answer(req)
    for behaviour in behaviours:
        if behaviour.recognises(req):
            text = behaviour.answer(req, rng)
            if text is not None:
                return text
    return _generic(req, rng)


def truncate(text: str) -> str:
    """Visible text of a reply cut by max_tokens: no closing fence, so no parsable proposal."""
    idx = text.rfind("```")
    if text.count("```") >= 2:
        text = text[:idx]
    return text[: max(0, int(len(text) * 0.6))]
