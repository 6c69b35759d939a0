"""Program requests whose reply goes in tagged sections: ``<NAME>``, ``<DESCRIPTION>`` and then
``<DIFF>`` (SEARCH/REPLACE blocks) or ``<CODE>`` (the whole program in a fence).

ShinkaEvolve's unchanged templates ask for this layout (diff, full rewrite and its variants,
crossover, fix), but recognition is by what a request contains, as an LLM reads it:

- the format: a line ``<DIFF>`` with a ``<<<<<<< SEARCH`` line asks for SEARCH/REPLACE blocks; a
  line ``<CODE>`` asks for the whole program in a fence tagged with the parent's language;
- the parent: the first fenced block after a ``Current program`` or ``Incorrect program``
  heading (any level, any case), prose lines allowed in between;
- other programs (borrowed from, as in every layout): every other fenced block of the first user
  message in the parent's language (prior programs, a crossover's second parent);
- a retry: a later user message saying the previous edit failed (``error``, ``not successful``).

The edit comes from ``program_model.choose_edit``, the model every layout shares, with the same
failure rates and random draws; only the wrapping differs. So for the same parent and other
programs and seed, this layout gets the same edit as OpenEvolve's or evotui's.
"""

from __future__ import annotations

import random
import re

from engine.code.languages import PYTHON, by_fence
from engine.llm.sim import program_model
from engine.llm.sim.plugins import message_text

_ASKS_DIFF = re.compile(r"^[ \t]*<DIFF>[ \t]*$", re.M)
_ASKS_CODE = re.compile(r"^[ \t]*<CODE>[ \t]*$", re.M)
_SEARCH_LINE = re.compile(r"^<<<<<<< SEARCH[ \t]*$", re.M)
_PARENT = re.compile(r"^#{1,3}[ \t]*(?:current|incorrect) program\b[^\n]*\n(?:(?!#|```)[^\n]*\n)*?"
                     r"```([\w+-]*)\n(.*?)```", re.M | re.S | re.I)
_FENCE = re.compile(r"```([\w+-]*)\n(.*?)```", re.S)
_FAILED = re.compile(r"\b(errors?|not successful|failed|failure)\b", re.I)
_WORD = re.compile(r"[a-z]+")


def _texts(messages: list[dict], role: str) -> list[str]:
    return [message_text(m.get("content")) for m in messages if m.get("role") == role]


def reply_format(system: str, first_user: str) -> str | None:
    """"diff" or "full" when the request asks for a tagged reply and shows a current program,
    else None (not this layout)."""
    asked = system + "\n" + first_user
    if not _PARENT.search(first_user):
        return None
    if _ASKS_DIFF.search(asked) and _SEARCH_LINE.search(asked):
        return "diff"
    if _ASKS_CODE.search(asked):
        return "full"
    return None


def recognises(messages: list[dict]) -> bool:
    users = _texts(messages, "user")
    return bool(users) and reply_format("\n".join(_texts(messages, "system")), users[0]) is not None


def _name(reason: str) -> str:
    """The edit's short name, as the layout asks: lowercase, underscores."""
    return "_".join(_WORD.findall(reason.lower())[:4]) or "edit"


def _tagged(reason: str, tag: str, body: str) -> str:
    return (f"<NAME>\n{_name(reason)}\n</NAME>\n\n<DESCRIPTION>\n{reason}\n</DESCRIPTION>\n\n"
            f"<{tag}>\n{body.strip()}\n</{tag}>")


def answer(messages: list[dict], rng: random.Random) -> str:
    """The tagged reply: the shared edit model's edit, wrapped as the request asks."""
    system = "\n".join(_texts(messages, "system"))
    users = _texts(messages, "user")
    first = users[0]
    fmt = reply_format(system, first) or "diff"
    m = _PARENT.search(first)
    tag, code = m.group(1), m.group(2)
    lang = by_fence(tag) or PYTHON
    others = [body for t, body in _FENCE.findall(first) if t == tag and body != code]
    retry = len(users) > 1 and bool(_FAILED.search(users[-1]))
    reason, edits = program_model.choose_edit(code, lang, fmt, first, others, None, retry, rng)
    wrap = "DIFF" if fmt == "diff" else "CODE"
    if isinstance(edits, str):  # a failure path: raw (broken) SEARCH/REPLACE text
        return _tagged(reason, wrap, edits)
    if not edits:
        return f"<NAME>\nno_change\n</NAME>\n\n<DESCRIPTION>\n{program_model.NO_CHANGE}\n</DESCRIPTION>"
    rendered = program_model.render(code, edits, fmt, rng, reason, lang)
    return _tagged(reason, wrap, rendered.partition("\n")[2])
