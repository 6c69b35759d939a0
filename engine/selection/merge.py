"""Merging two pool artifacts that grew apart from a common ancestor (GEPA's merge, for text).

Asynchronous evolution produces siblings: proposals made in parallel from the same parent each
add their own improvement, and none holds the others'. A merge applies both descendants' edits
to their nearest common ancestor, line by line, like a three-way merge in version control:
- edits that touch different ancestor lines are all applied;
- insertions at the same place are both kept (ours first), since instructions and code
  additions are usually independent there; identical lines are kept once;
- edits that replace or delete overlapping ancestor lines differently are a conflict: no merge.
The merged text is only a candidate; it is gated and fully validated like any proposal.
Artifacts with named components are merged component by component (`merge_text`).
"""

from __future__ import annotations

import difflib
import random
from dataclasses import replace
from typing import Mapping, Sequence

from engine.components import Components, render
from engine.pool import Artifact, Pool

Hunk = tuple[int, int, list[str]]
"""(start, end, replacement): ancestor lines [start, end) become replacement."""


def _hunks(base: list[str], other: list[str]) -> list[Hunk]:
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [(i1, i2, other[j1:j2]) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _overlap(a: Hunk, b: Hunk) -> bool:
    (a1, a2, _), (b1, b2, _) = a, b
    if a1 == a2 or b1 == b2:  # an insertion conflicts only when it falls inside the other's range
        point, (lo, hi) = (a1, (b1, b2)) if a1 == a2 else (b1, (a1, a2))
        return lo < point < hi
    return max(a1, b1) < min(a2, b2)


def merge_text(base: Artifact, ours: Artifact, theirs: Artifact) -> str | None:
    """The merged text of two descendants of `base`: per component when all three have the same
    components (each component merged on its own, so an edit never crosses a component
    boundary), else the line merge of their texts."""
    parts = (base.components, ours.components, theirs.components)
    if None in parts or len({tuple(c.name for c in p) for p in parts}) != 1:
        return three_way(base.text, ours.text, theirs.text)
    merged = three_way_components(*parts)
    return render(merged) if merged is not None else None


def three_way_components(base: Components, ours: Components, theirs: Components) -> Components | None:
    """Components merged one by one (same names in the same order): a component only one side
    changed takes that side's text; one both changed is line-merged. None on a conflict in any
    component, or when the result is ours' or theirs' components."""
    out = []
    for b, o, t in zip(base, ours, theirs):
        bt, ot, tt = b.text.strip(), o.text.strip(), t.text.strip()
        if ot == tt or tt == bt:
            text = ot
        elif ot == bt:
            text = tt
        else:
            text = _apply(bt, ot, tt)
            if text is None:
                return None
        out.append(replace(o, text=text.strip()))  # keeps the type and frozen regions
    result = tuple(out)
    if [c.text for c in result] in ([c.text.strip() for c in ours], [c.text.strip() for c in theirs]):
        return None
    return result


def three_way(base: str, ours: str, theirs: str) -> str | None:
    """Both descendants' edits applied to base; None on a conflict or when the result adds
    nothing to ours or theirs (one already contains the other's edits)."""
    text = _apply(base, ours, theirs)
    if text is None or text.strip() in (ours.strip(), theirs.strip()):
        return None
    return text


def _apply(base: str, ours: str, theirs: str) -> str | None:
    """Both edits applied to base; None on a conflict only."""
    base_l, ours_l, theirs_l = base.splitlines(), ours.splitlines(), theirs.splitlines()
    mine, other = _hunks(base_l, ours_l), _hunks(base_l, theirs_l)
    merged_hunks: list[Hunk] = list(mine)
    for h in other:
        same_place = [m for m in mine if (m[0], m[1]) == (h[0], h[1])]
        if same_place and same_place[0][2] == h[2]:
            continue  # both made the same edit
        if same_place and h[0] == h[1]:  # two insertions at one point: keep both
            idx = merged_hunks.index(same_place[0])
            extra = [ln for ln in h[2] if ln not in same_place[0][2]]
            merged_hunks[idx] = (h[0], h[1], same_place[0][2] + extra)
            continue
        if any(_overlap(m, h) or (m[0], m[1]) == (h[0], h[1]) for m in mine):
            return None
        merged_hunks.append(h)
    out: list[str] = []
    pos = 0
    # Insertions before replacements at the same start keep ancestor order stable.
    for start, end, repl in sorted(merged_hunks, key=lambda h: (h[0], h[1] != h[0])):
        out.extend(base_l[pos:start])
        out.extend(repl)
        pos = max(pos, end)
    out.extend(base_l[pos:])
    return "\n".join(out)


def pair_key(a: str, b: str) -> tuple[str, str]:
    """How a pair is remembered in MergeState.tried (order-free)."""
    return (a, b) if a <= b else (b, a)


def parent_ids(item) -> tuple[str, ...]:
    """The parents an item's artifact gets: both merged artifacts, or the proposal's parent."""
    m = item.merge
    return (m.ours, m.theirs) if m is not None else (item.parent_id,)


def merge_meta(item) -> dict:
    """Artifact meta recording a merge's common ancestor (empty for proposals)."""
    m = item.merge
    return {"merge_base": m.base} if m is not None else {}


def ancestors(pool_get, artifact_id: str) -> list[str]:
    """artifact_id and its first-parent ancestors, nearest first."""
    chain, seen = [], set()
    current: str | None = artifact_id
    while current is not None and current not in seen:
        seen.add(current)
        chain.append(current)
        parents = pool_get(current).parent_ids
        current = parents[0] if parents else None
    return chain


def pick_pair(front: Mapping[str, int], pool_get, tried: set[tuple[str, str]],
              rng: random.Random, prefer: str | None = None) -> tuple[str, str, str, str] | None:
    """(ours, theirs, ancestor, merged text) for two front artifacts that descend from a common
    ancestor, neither from the other, not tried before and without a conflict. Pairs with
    `prefer` (the current best: merging into it compounds progress) come first, then the largest
    combined front weight (ties broken by rng). None if there is none."""
    ids = sorted(front)
    pairs: list[tuple[bool, int, float, str, str]] = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if pair_key(a, b) not in tried:
                pairs.append((prefer in (a, b), front[a] + front[b], rng.random(), a, b))
    chains = {aid: ancestors(pool_get, aid) for aid in ids}
    for *_, a, b in sorted(pairs, reverse=True):
        tried.add(pair_key(a, b))
        chain_a, on_b = chains[a], set(chains[b])
        if a in on_b or b in chain_a:
            continue
        common = next((x for x in chain_a if x in on_b), None)
        if common is None:
            continue
        ours, theirs = (a, b) if pool_get(a).val_mean >= pool_get(b).val_mean else (b, a)
        text = merge_text(pool_get(common), pool_get(ours), pool_get(theirs))
        if text is not None:
            return ours, theirs, common, text
    return None


def plan_merge(pool: Pool, front: Mapping[str, int], tried: set[tuple[str, str]], rng: random.Random) -> dict | None:
    """The next merge among `front` (pairs with the pool's best first) as a merge item's fields:
    ours, theirs, base, text and an empty gate batch; None if no pair merges."""
    best = pool.best()
    found = pick_pair(front, pool.get, tried, rng, prefer=best.artifact_id if best is not None else None)
    if found is None:
        return None
    ours, theirs, base, text = found
    return {"ours": ours, "theirs": theirs, "base": base, "text": text, "minibatch": []}


def differing_examples(a: Artifact, b: Artifact, example_ids: Sequence[str], k: int,
                       rng: random.Random) -> list[str]:
    """Up to k validation examples where a and b score differently (the merge's gate batch),
    filled up with other examples if fewer differ."""
    differ = [ex for ex in example_ids if a.val_scores.get(ex) != b.val_scores.get(ex)]
    same = [ex for ex in example_ids if a.val_scores.get(ex) == b.val_scores.get(ex)]
    rng.shuffle(differ)
    rng.shuffle(same)
    return (differ + same)[:k]
