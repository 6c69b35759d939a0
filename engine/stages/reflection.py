"""The reflection prompt (propose stage) and the parser of its answer.

Layout keeps the stable part first so prefix caches on the server can hit: the fixed system
message, then the task description, then the current instructions, then the traces.
Contract with any LLM (and the simulator): the current instructions are the first ``` block of
the user message, each trace has a `Feedback:` line, and the answer's new instructions are the
last complete ``` block of the reply.
"""

from __future__ import annotations

import re
from typing import Sequence

from engine import components
from engine.components import Component

SYSTEM = (
    "You improve the instructions given to an assistant. You are shown the current instructions, "
    "inputs the assistant received, its outputs, their scores and feedback on what went wrong. "
    "Infer the general rules behind the feedback and write improved instructions that state them "
    "clearly. Keep what already works."
)

_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```", re.DOTALL)
_NAMED_FENCE = re.compile(r"^#+\s*\[([A-Za-z0-9_.-]+)\][^\n]*\n+```[^\n`]*\n(.*?)\n?```", re.DOTALL | re.M)


OTHER_CHARS = 1500
"""Most characters of each other prompt shown as inspiration."""


def build_messages(task_description: str, current: str, traces: list[dict],
                   others: list[tuple[str, float, str]] = ()) -> list[dict]:
    """others = (artifact id, validation mean, text) of other prompts the strategy shows; they
    come after the examples, quoted rather than fenced, so the current instructions stay the
    first ``` block."""
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
    if others:
        parts.append("## Other instructions tried (for inspiration)")
        for aid, score, text in others:
            body = text.strip()[:OTHER_CHARS]
            quoted = "\n".join(f"> {line}" for line in body.splitlines())
            parts.append(f"### {aid} (validation mean {score:.2f})\n{quoted}\n")
    parts.append("Write the complete improved instructions inside a single ``` block.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def _examples(traces: list[dict]) -> list[str]:
    parts = ["## Examples"]
    for n, tr in enumerate(traces, start=1):
        parts.append(
            f"### Example {n}\nInput:\n{tr['input']}\nOutput:\n{tr['output']}\n"
            f"Score: {tr['score']:.2f}\nFeedback: {tr['feedback'] or 'none'}\n"
        )
    return parts


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.strip().splitlines()) or ">"


def build_component_messages(task_description: str, components: Sequence[Component], targets: Sequence[str],
                             traces: list[dict], others: list[tuple[str, float, str]] = ()) -> list[dict]:
    """The reflection for a multi-component artifact. The assistant's instructions are all the
    components together (their rendering, engine/components/__init__.py). One target: its text is the
    first ``` block (the contract above), the other components come first, quoted, as read-only
    context, and the answer is the target's new text in one ``` block. Several targets: each is
    a `### [name]` heading over its own ``` block, and the answer repeats that layout."""
    parts = [f"Task: {task_description}\n"] if task_description else []
    parts.append("The instructions consist of named components, given to the assistant together, "
                 "each under a `## [name]` heading.\n")
    fixed = [c for c in components if c.name not in targets]
    if fixed:
        parts.append("## Other components (context only: they stay as they are)")
        parts.extend(f"### [{c.name}]\n{_quoted(c.text)}\n" for c in fixed)
    by_name = {c.name: c for c in components}
    if len(targets) == 1:
        parts.append(f"## Current instructions: component [{targets[0]}]\n```\n"
                     + by_name[targets[0]].text.strip() + "\n```\n")
    else:
        parts.append("## Current instructions: the components to improve")
        parts.extend(f"### [{name}]\n```\n{by_name[name].text.strip()}\n```\n" for name in targets)
    parts.extend(_examples(traces))
    if others:
        parts.append("## Other instructions tried (for inspiration)")
        for aid, score, text in others:
            parts.append(f"### {aid} (validation mean {score:.2f})\n{_quoted(text[:OTHER_CHARS])}\n")
    if len(targets) == 1:
        parts.append(f"Write the complete improved text of component [{targets[0]}] (without its heading) "
                     "inside a single ``` block.")
    else:
        parts.append("For each component, write a `### [name]` heading line followed by its complete improved "
                     "text in a ``` block; a component you leave out stays as it is.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_components(reply: str, names: Sequence[str]) -> dict[str, str]:
    """name -> new text of each `### [name]` heading followed by a ``` block in the reply (the
    last one of a name wins); {} if there is none."""
    found: dict[str, str] = {}
    for m in _NAMED_FENCE.finditer(reply or ""):
        name, body = m.group(1), m.group(2).strip()
        if name in names and body:
            found[name] = body
    return found


def parse_component_reply(reply: str, parts: Sequence[Component], targets: list[str]
                          ) -> tuple[str | None, list[str], str]:
    """(the child's rendering, the changed names, "") from a reply for `targets`, or (None, [],
    why not). The components the reply does not give are kept as they are."""
    if len(targets) == 1:
        text = parse_instructions(reply)
        updates = {targets[0]: text} if text is not None else {}
    else:
        updates = parse_components(reply, targets)
    if not updates:
        return None, [], "no parsable instructions block"
    names = [c.name for c in parts]
    if any(components.has_header_line(text, names) for text in updates.values()):
        return None, [], "a component's new text holds a component heading line"
    child = components.replace(parts, updates)
    changed = components.changed(parts, child)
    if not changed:
        return None, [], "no change from parent"
    return components.render(child), changed, ""


def parse_instructions(reply: str) -> str | None:
    """The last complete fenced block, stripped; None if there is none or it is empty."""
    blocks = _FENCE.findall(reply or "")
    if not blocks:
        return None
    text = blocks[-1].strip()
    return text or None


# -- stale-item reflection (reflective async, FlashEvolve §3.2) ----------------------------

REFLECT_SYSTEM = (
    "You maintain a pool of instructions that is improved by many proposals at once. A proposal "
    "was written against an older pool; the pool has changed since. Decide whether the proposal "
    "still adds something useful to the current best instructions. Answer `VERDICT: keep` if it "
    "is still useful as it is, `VERDICT: patch` if its useful part should be applied to the "
    "current best instructions (give the complete patched instructions in one ``` block), or "
    "`VERDICT: discard` if it is redundant, conflicting or too specific. Then `REASON:` in one line."
)
MAX_CHANGES_SHOWN = 8
_VERDICT = re.compile(r"VERDICT:\s*\**\s*(keep|patch|discard)\b", re.I)
_REASON = re.compile(r"REASON:\s*(.+)", re.I)


def _diff(old: str, new: str) -> str:
    import difflib

    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))[2:]
    return "\n".join(ln for ln in lines if not ln.startswith("@@")) or "(no textual change)"


def build_reflect_messages(current_best: str, stale_parent: str, stale_child: str, item_version: int,
                           pool_version: int, changes: list[tuple[int, str, float, str, str]]) -> list[dict]:
    """changes: (version, artifact_id, score, parent_text, text) of pool additions since the item."""
    shown = changes[-MAX_CHANGES_SHOWN:]
    parts = [
        "## Current best instructions\n```\n" + current_best.strip() + "\n```\n",
        f"## Stale proposal (made at pool version {item_version}; the pool is now at version {pool_version})",
        "Its change to the instructions it was made from:\n" + _diff(stale_parent, stale_child) + "\n",
        "Proposed instructions:\n```\n" + stale_child.strip() + "\n```\n",
        "## Pool changes since then",
    ]
    if len(changes) > len(shown):
        parts.append(f"[... {len(changes) - len(shown)} earlier change(s) omitted ...]")
    for version, artifact_id, score, parent_text, text in shown:
        parts.append(f"### v{version}: {artifact_id} (validation score {score:.3f})\n{_diff(parent_text, text)}\n")
    parts.append("Answer with VERDICT and REASON lines; for patch, the complete patched instructions in one ``` block.")
    return [{"role": "system", "content": REFLECT_SYSTEM}, {"role": "user", "content": "\n".join(parts)}]


def parse_verdict(reply: str) -> tuple[str, str, str | None]:
    """(verdict, reason, patched text); a malformed answer is ('malformed', why, None)."""
    m = _VERDICT.search(reply or "")
    if not m:
        return "malformed", "no VERDICT line", None
    verdict = m.group(1).lower()
    reason_m = _REASON.search(reply)
    reason = reason_m.group(1).strip() if reason_m else ""
    if verdict != "patch":
        return verdict, reason, None
    patched = parse_instructions(reply[m.end():])
    if patched is None:
        return "malformed", "patch verdict without a complete ``` block", None
    return verdict, reason, patched
