"""Generic simulated behaviour: the repair of a stale program proposal (engine/capabilities/program_repair.py).

Recognised by the marker line `evotui-program-repair:` in the system message; answered
deterministically from the request alone, as a careful reader of it would:

- the current best is the proposal's own parent: `keep` (nothing it was made against changed);
- the best already holds every hunk of the proposal's change: `discard` (redundant);
- otherwise each hunk is carried onto the best program by its lines (its context and removed
  lines, else its removed lines alone, found exactly once): some apply -> `patch`, in the
  format the request names (`evotui-repair-format:`); none apply -> `discard`, since a newer
  commit changed the lines the proposal edits.
"""

from __future__ import annotations

import difflib
import re

from engine.llm.sim.plugins import SimRequest

MARKER = "evotui-program-repair:"
_BEST = re.compile(r"^## Current best program \((\S+?),[^\n]*\n```([\w+-]*)\n(.*?)```", re.S | re.M)
_PARENT = re.compile(r"^## Stale proposal \(made at pool version \d+ from (\S+?),", re.M)
_DIFF = re.compile(r"Its change to its parent:\n```diff\n(.*?)```", re.S)
_FORMAT = re.compile(r"evotui-repair-format: (diff|udiff|full)")

Hunk = tuple[list[str], list[str], list[str], list[str]]
"""(old lines: context and removed, new lines: context and added, removed lines, added lines)."""


def recognises(req: SimRequest) -> bool:
    return MARKER in req.system


def hunks(diff: str) -> list[Hunk]:
    out: list[Hunk] = []
    cur: Hunk | None = None
    for line in diff.splitlines():
        if line.startswith("@@"):
            cur = ([], [], [], [])
            out.append(cur)
        elif cur is None or line.startswith(("---", "+++", "\\")):
            continue
        elif line.startswith("-"):
            cur[0].append(line[1:])
            cur[2].append(line[1:])
        elif line.startswith("+"):
            cur[1].append(line[1:])
            cur[3].append(line[1:])
        else:
            text = line[1:] if line.startswith(" ") else line
            cur[0].append(text)
            cur[1].append(text)
    return [h for h in out if h[2] or h[3]]


def _find(lines: list[str], block: list[str]) -> int | None:
    """Where block occurs in lines, if exactly once."""
    n = len(block)
    at = [i for i in range(len(lines) - n + 1) if n and lines[i:i + n] == block]
    return at[0] if len(at) == 1 else None


def _carry(best: list[str], hunk: Hunk) -> tuple[list[str], list[str]] | None:
    """(SEARCH, REPLACE) lines carrying one hunk onto the best program, or None if it does not apply."""
    old, new, removed, added = hunk
    if _find(best, old) is not None:
        return old, new
    if removed and _find(best, removed) is not None:
        return removed, added
    return None


def answer(req: SimRequest) -> str:
    best_m, parent_m, diff_m = _BEST.search(req.user), _PARENT.search(req.user), _DIFF.search(req.user)
    if not (best_m and parent_m and diff_m):
        return "VERDICT: keep\nREASON: the request does not show the best program and the proposal's change"
    best_id, fence, best_text = best_m.group(1), best_m.group(2), best_m.group(3)
    if best_id == parent_m.group(1):
        return "VERDICT: keep\nREASON: the current best is still the proposal's parent"
    best = best_text.splitlines()
    found = hunks(diff_m.group(1))
    if not found:
        return "VERDICT: discard\nREASON: the proposal's change is empty"
    if all(_find(best, h[1]) is not None for h in found):
        return "VERDICT: discard\nREASON: the current best already holds this change"
    patched, blocks = list(best), []
    for hunk in found:
        carried = _carry(patched, hunk)
        if carried is None:
            continue
        search, replace = carried
        at = _find(patched, search)
        patched[at:at + len(search)] = replace
        blocks.append((search, replace))
    if not blocks:
        return "VERDICT: discard\nREASON: a newer commit changed the lines this proposal edits"
    reason = ("its change still applies to the current best" if len(blocks) == len(found)
              else f"{len(blocks)} of {len(found)} hunks still apply to the current best")
    head = f"VERDICT: patch\nREASON: {reason}\n"
    fmt_m = _FORMAT.search(req.user)
    fmt = fmt_m.group(1) if fmt_m else "diff"
    if fmt == "full":
        return head + f"```{fence}\n" + "\n".join(patched) + "\n```"
    if fmt == "udiff":
        diff = difflib.unified_diff(best, patched, "a/program", "b/program", lineterm="", n=2)
        return head + "```diff\n" + "\n".join(diff) + "\n```"
    return head + "\n".join(
        "<<<<<<< SEARCH\n" + "\n".join(s) + "\n=======\n" + "\n".join(r) + "\n>>>>>>> REPLACE" for s, r in blocks)
