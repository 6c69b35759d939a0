"""The TextGrad-style resource optimizer (Autogenesis §3.2): a proposal in two calls.

A component declared with `optimizer = "textgrad"` in task.toml is not rewritten by one
reflection call (engine/stages/reflection.py) but by a textual-gradient step:

1. gradient: from the minibatch's traces and feedback, a critique of the component — what in
   its text caused each failure, or that it did not cause it — and no rewrite;
2. apply: the component rewritten from the critique alone (the step): this call sees the
   component, the other components' names and the critique, never the traces.

Both calls are stage "propose": they are the proposal, so they are counted, charged and
budgeted with it (one proposal, two LLM calls). The critique is kept in the item's
notes["critique"], so the child's meta (lineage, export) shows why it changed.

Contract with any LLM (and the simulator, engine/tasks/agentworld_textgrad_sim.py): each
system message starts with its marker line (GRADIENT_MARKER, APPLY_MARKER); in both requests
the component's current text is the first ``` block, after a `## Current instructions:
component [name]` heading; the apply request quotes the critique (`> ` lines) under
`## Critique`; its answer is the new text in one ``` block (parsed like a reflection's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from engine.components import Component
from engine.items import WorkItem
from engine.llm.shrink import middle_out
from engine.stages import reflection

MARKER = "evotui-textgrad:"
"""The start of both marker lines (a simulated reflector declines what carries it)."""
GRADIENT_MARKER = f"{MARKER} gradient"
APPLY_MARKER = f"{MARKER} apply"
GRADIENT_SYSTEM = (
    f"{GRADIENT_MARKER}\n"
    "You compute a textual gradient: a critique of one component of the instructions given to an "
    "assistant. You are shown the component, the inputs the assistant received, its outputs, their "
    "scores and feedback. For each failing example, say what in the component's text caused the "
    "failure (a missing, vague or wrong statement), or that this component did not cause it. Do not "
    "rewrite the component: write only the critique, one point per line starting with `- `."
)
APPLY_SYSTEM = (
    f"{APPLY_MARKER}\n"
    "You apply a textual gradient: rewrite one component of an assistant's instructions so that it "
    "answers every point of the critique that blames it. The critique is all you know about how the "
    "component performed. Change what the critique names and keep everything else."
)
CRITIQUE_CHARS = 4000
"""Most characters of a critique passed on and kept in the child's meta (a runaway answer is cut)."""
_FENCE_LINE = re.compile(r"^\s*```")


@dataclass(frozen=True)
class Critique:
    """The gradient call's outcome: the critique text, or why there is none."""

    text: str | None
    reason: str = ""


def build_gradient_messages(task_description: str, parts: Sequence[Component], target: str,
                            traces: list[dict]) -> list[dict]:
    """The gradient request for `target`: the other components quoted as context, the target in
    the first ``` block, then the examples with their feedback."""
    body = [f"Task: {task_description}\n"] if task_description else []
    body.append("The instructions consist of named components, given to the assistant together, "
                "each under a `## [name]` heading.\n")
    others = [c for c in parts if c.name != target]
    if others:
        body.append("## Other components (context only: critique the target alone)")
        body.extend(f"### [{c.name}]\n{reflection._quoted(c.text)}\n" for c in others)
    text = next(c.text for c in parts if c.name == target)
    body.append(f"## Current instructions: component [{target}]\n```\n{text.strip()}\n```\n")
    body.extend(reflection._examples(traces))
    body.append(f"Write the critique of component [{target}]: one `- ` line per point, naming the examples it "
                "explains. No rewrite and no ``` block.")
    return [{"role": "system", "content": GRADIENT_SYSTEM}, {"role": "user", "content": "\n".join(body)}]


def parse_critique(reply: str | None) -> Critique:
    """The critique of a gradient reply: its text without fenced blocks (a rewrite is not a
    gradient), cut at CRITIQUE_CHARS; none when nothing is left."""
    lines, fenced = [], False
    for line in (reply or "").splitlines():
        if _FENCE_LINE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    text = "\n".join(lines).strip()
    if not text:
        return Critique(None, "empty critique (textgrad gradient)")
    return Critique(text[:CRITIQUE_CHARS])


def build_apply_messages(task_description: str, parts: Sequence[Component], target: str,
                         critique: str) -> list[dict]:
    """The apply request: the target's text as the first ``` block and the critique quoted; no
    traces (the step follows the gradient only)."""
    body = [f"Task: {task_description}\n"] if task_description else []
    names = ", ".join(f"[{c.name}]" for c in parts if c.name != target)
    if names:
        body.append(f"The component is given to the assistant together with the components {names}, "
                    "which stay as they are.\n")
    text = next(c.text for c in parts if c.name == target)
    body.append(f"## Current instructions: component [{target}]\n```\n{text.strip()}\n```\n")
    body.append(f"## Critique\n{reflection._quoted(critique)}\n")
    body.append(f"Write the complete improved text of component [{target}] (without its heading) inside a single "
                "``` block.")
    return [{"role": "system", "content": APPLY_SYSTEM}, {"role": "user", "content": "\n".join(body)}]


def extra_proposal_calls(parts: Sequence[Component] | None) -> int:
    """LLM calls a proposal may make beyond a reflection's one, for budget reservations: 1 when
    any component is textgrad (its gradient), else 0."""
    return 1 if any(c.optimizer == "textgrad" for c in parts or ()) else 0


def uses_textgrad(parts: Sequence[Component], targets: Sequence[str]) -> bool:
    """Whether this proposal is a textgrad step: exactly one target, declared textgrad (a
    proposal that rewrites several components at once stays one reflection call)."""
    if len(targets) != 1:
        return False
    return any(c.name == targets[0] and c.optimizer == "textgrad" for c in parts)


async def step(stages, item: WorkItem, parts: Sequence[Component], target: str, gradient_messages: list[dict]):
    """The two calls of one textgrad proposal for `target` (`stages` is the PromptStages):
    (the apply reply, "") to be parsed like a reflection's, or (the gradient reply, why not)
    when the gradient gave no critique. LLM errors propagate, as a reflection call's do."""
    llm = stages.ctx.reflection_llm
    grad = await llm.chat(gradient_messages, stage="propose", shrink=middle_out)
    if grad.finish_reason == "length":
        return grad, "truncated critique (textgrad gradient, finish_reason=length)"
    critique = parse_critique(grad.text)
    if critique.text is None:
        return grad, critique.reason
    # Kept before the step: a child's meta and an audit row show the gradient that made it.
    item.notes = {**(item.notes or {}), "critique": critique.text, "optimizer": f"textgrad [{target}]"}
    messages = build_apply_messages(stages.ctx.task.description, parts, target, critique.text)
    messages = stages.with_component_rules(messages, tuple(parts), [target])
    return await llm.chat(messages, stage="propose", shrink=middle_out), ""
