"""Task plug-ins of the simulated model: how a task teaches the simulator its request layouts.

The simulator is a measuring instrument that must answer any reasonable prompt layout, so it
knows no task. A task that wants realistic simulated answers (a task model that follows stated
rules, a reflector that reads its feedback) provides a ``SimBehaviour``; whoever builds the
backend passes the plug-ins in: ``create_sim_app(cfg, behaviours=...)`` or
``sim_transport(cfg, behaviours=...)`` (the engine and ``evotui sim-server`` pass every built-in
task's, see engine/tasks/sim_behaviours.py). Dependencies point one way: a plug-in may import
this module and its task; nothing under engine/llm/sim imports a task.

How the simulator chooses (answer.py): it first reads the request into a ``SimRequest``, whose
``kind`` it decides from the stage (the ``X-Evotui-Stage`` header) and the content alone:

- ``patch``: a propose/default request whose system message names ``evotui-patch-format:``
  (program tasks; SEARCH/REPLACE, rewrite or unified diff);
- ``judge``: stage ``reflect`` (is a stale proposal still useful? VERDICT/REASON);
- ``propose``: stage ``propose``, or any other stage but rollout/evaluate whose last user message
  has a fenced block and a ``Feedback:`` line (write improved instructions);
- ``task``: everything else (the task model answering one example).

Then it asks each plug-in in order: the first whose ``recognises(request)`` is true and whose
``answer(request, rng)`` is not None gives the reply. Otherwise a generic behaviour built into
the simulator answers: SEARCH/REPLACE or rewrite proposals (program_model.py) for ``patch``,
``keep`` for ``judge``, the request's first fenced block lightly reworded for ``propose``, and a
one-line generic answer for ``task``.

A plug-in must decide by content, never by which task is running (a copy of a task folder under
another name gets the same answers), and must not draw from ``rng`` before it commits to an
answer: a declined request then gets exactly the reply it would get without the plug-in, which
keeps every reply reproducible from (seed, request).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Kind = Literal["patch", "judge", "propose", "task"]


def message_text(content: object) -> str:
    """Text of a message content (a string or a list of OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One chat request as the simulated model reads it."""

    messages: list[dict]
    stage: str
    """The X-Evotui-Stage header ("default" when absent)."""
    kind: Kind
    """What the request asks for, decided by the simulator from the stage and content (see above)."""
    system: str
    """All system messages' text, joined by newlines."""
    user: str
    """The last user message's text ("" if there is none)."""


@runtime_checkable
class SimBehaviour(Protocol):
    """A task's simulated model: recognises its own request layouts and answers them."""

    @property
    def name(self) -> str:
        """Short name for diagnostics (e.g. the task's name)."""
        ...

    def recognises(self, request: SimRequest) -> bool:
        """Whether the request is in this task's layout (cheap, by content; no randomness)."""
        ...

    def answer(self, request: SimRequest, rng: random.Random) -> str | None:
        """The reply's visible text, or None to leave the request to the next behaviour."""
        ...
