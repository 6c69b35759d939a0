"""Generic simulated behaviour: the edit-type judge of `evotui analyze` (engine/trace/analyze).

Recognised by content: the system message carries the marker line ``evotui-edit-judge:``. The
answer is a JSON list of labels from the paper's nine-label taxonomy, derived deterministically
from the diff in the user message (no randomness), so an analysis of a simulated run is
meaningful and repeatable: changed numbers only -> hyperparameter_tuning, an import ->
external_dependency, a new def -> composition, a removed def or deleted lines only -> pruning,
a loop replaced by numpy calls -> efficiency, a new guard -> bug_fix, a large rewrite ->
architectural_change, comment or rename-only -> refactor, anything else -> local_refinement.
"""

from __future__ import annotations

import json
import re

from engine.llm.sim.plugins import SimRequest

MARKER = "evotui-edit-judge:"
_NUM = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_DEF = re.compile(r"^\s*(def|class)\s+(\w+)")
_IMPORT = re.compile(r"^\s*(import\s|from\s+\S+\s+import\s)")
_GUARD = re.compile(r"^\s*(if\b.*:|.*\b(max|min|clip|abs)\()")


def recognises(req: SimRequest) -> bool:
    return MARKER in req.system


def changed_lines(user: str) -> tuple[list[str], list[str]]:
    """(added, removed) lines of the unified diffs in a message."""
    added, removed = [], []
    for line in user.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:])
        elif line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:])
    return added, removed


def _code(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def labels_for(user: str) -> list[str]:
    added, removed = changed_lines(user)
    code_added, code_removed = _code(added), _code(removed)
    labels: set[str] = set()
    if not code_added and not code_removed:
        return ["refactor"] if added or removed else ["local_refinement"]
    skel_added = sorted(_NUM.sub("N", ln.strip()) for ln in code_added)
    skel_removed = sorted(_NUM.sub("N", ln.strip()) for ln in code_removed)
    if skel_added == skel_removed:
        return ["hyperparameter_tuning"]  # same lines up to their numbers
    if any(_IMPORT.match(ln) for ln in code_added + code_removed):
        labels.add("external_dependency")
    defs_added = {m.group(2) for ln in code_added if (m := _DEF.match(ln))}
    defs_removed = {m.group(2) for ln in code_removed if (m := _DEF.match(ln))}
    if defs_added and defs_removed and len(code_added) == len(code_removed):
        labels.add("refactor")
    elif defs_added - defs_removed:
        labels.add("composition")
    if defs_removed - defs_added or (code_removed and not code_added):
        labels.add("pruning")
    if any(ln.strip().startswith("for ") for ln in code_removed) and any("np." in ln for ln in code_added):
        labels.add("efficiency")
    if any(_GUARD.match(ln) for ln in code_added) and not any(_GUARD.match(ln) for ln in code_removed):
        labels.add("bug_fix")
    if len(code_added) >= 15 and len(code_removed) >= 15:
        labels.add("architectural_change")
    paired = {_NUM.sub("N", ln.strip()) for ln in code_added} & {_NUM.sub("N", ln.strip()) for ln in code_removed}
    if paired:
        labels.add("hyperparameter_tuning")
    if not labels or (set(labels) <= {"hyperparameter_tuning"} and len(code_added) > len(paired)):
        labels.add("local_refinement")
    return sorted(labels)


def answer(req: SimRequest) -> str:
    return json.dumps(labels_for(req.user))
