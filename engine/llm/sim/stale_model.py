"""How the simulated model judges a stale proposal (reflective async) in the rule world.

It reads only the request text: the current best instructions (first fenced block), the stale
proposal's change (the `+`/`-` lines of its diff) and the proposed instructions. It classifies
the rule statements the proposal added and compares them with the current best:
- all already stated correctly there           -> discard (redundant)
- it adds a wrong variant of a rule stated right -> discard (conflicting)
- it states rules the best lacks (or fixes one)  -> patch: the best plus those lines
- nothing recognisable added                     -> discard (too specific / vague)
With probability P_MISJUDGE the verdict is flipped between patch/keep and discard, so
reflection is useful but not an oracle.
"""

from __future__ import annotations

import random
import re

from engine.tasks.ruleworld import classify, prompt_status

P_MISJUDGE = 0.1
"""The simulated reflector gets the verdict wrong this often."""

_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def judge(user_text: str, rng: random.Random) -> str | None:
    """A VERDICT/REASON answer, or None when the request is not a rule-world stale check."""
    if "## Stale proposal" not in user_text or "## Current best instructions" not in user_text:
        return None
    blocks = _FENCE.findall(user_text)
    if len(blocks) < 2:
        return None
    best = blocks[0].strip("\n")
    section = user_text.split("## Stale proposal", 1)[1].split("## Pool changes since then", 1)[0]
    added = [ln[1:].strip() for ln in section.splitlines() if ln.startswith("+") and ln[1:].strip()]
    status = prompt_status(best)
    new_lines: list[str] = []
    redundant = conflicting = 0
    for line in added:
        stated = classify(line)
        if not stated:
            continue
        useful = False
        for rid, kind in stated:
            if kind == "right" and status[rid] in ("none", "wrong"):
                useful = True
            elif kind == "wrong" and status[rid] in ("right", "both"):
                conflicting += 1
            else:
                redundant += 1
        if useful:
            new_lines.append(line)
    if new_lines:
        verdict, reason = "patch", f"adds {len(new_lines)} rule(s) the current best lacks"
    elif conflicting:
        verdict, reason = "discard", "conflicts with a rule the current best already states"
    elif redundant:
        verdict, reason = "discard", "redundant: the current best already states it"
    else:
        verdict, reason = "discard", "too specific: no transferable rule"
    if rng.random() < P_MISJUDGE:
        verdict = "discard" if verdict == "patch" else "keep"
        reason = "(misjudged) " + reason
    if verdict == "patch":
        patched = "\n".join([best.rstrip(), *new_lines]).strip()
        return f"VERDICT: patch\nREASON: {reason}\n```\n{patched}\n```"
    return f"VERDICT: {verdict}\nREASON: {reason}"
