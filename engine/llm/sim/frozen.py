"""Frozen regions in a simulated proposer's answer (engine/llm/sim/README.md, "Frozen regions").

A proposal request for a named component may carry a `## Component rules` section
(engine/components/__init__.py: rules_section) quoting the component's frozen regions:

    Frozen region 1 of [round_total]:
    > def round_total(x):

A real model mostly copies them; sometimes it rewrites one anyway. A plug-in that rewrites a
component passes its new text through `keep_frozen`: each region the text still holds is kept
with P_KEEP_FROZEN, else left out (so the engine's enforcement is exercised). No region, no draw
from rng: requests without rules get exactly the replies they got before.
"""

from __future__ import annotations

import random
import re

P_KEEP_FROZEN = 0.9
"""A frozen region survives a rewrite this often (a model told to keep a text verbatim mostly
does; the rest are the edits the engine must refuse)."""

_REGION = re.compile(r"^Frozen region \d+ of \[([A-Za-z0-9_.-]+)\]:\n((?:>[^\n]*(?:\n|$))+)", re.MULTILINE)


def frozen_regions(user: str) -> dict[str, list[str]]:
    """component name -> its frozen regions, read from the request's quoted `Frozen region` blocks."""
    out: dict[str, list[str]] = {}
    for m in _REGION.finditer(user):
        lines = m.group(2).rstrip("\n").split("\n")
        out.setdefault(m.group(1), []).append("\n".join(ln[2:] if ln.startswith("> ") else ln[1:] for ln in lines))
    return out


def keep_frozen(text: str, regions: list[str], rng: random.Random) -> tuple[str, int]:
    """(`text` with each region it holds kept with P_KEEP_FROZEN, else cut out; how many were cut)."""
    dropped = 0
    for region in regions:
        if region and region in text and rng.random() >= P_KEEP_FROZEN:
            text = text.replace(region, "", 1)
            dropped += 1
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n"), dropped
