"""Reflective repair of a stale note (a LoongFlow plan, ContextEvolve guidance).

A note is made against a pool version; when the run's staleness policy is reflective and the
pool has moved on by more than its max_gap before the proposer sees the note, one LLM call
(stage `<stage>_revise`, counted in llm_by_stage) shows the note and what changed in the pool
since (each new artifact with its parent, scores and its own plan / summary, and failed
candidates) and asks for the note revised, or KEEP. Its system message starts with a marker line
the simulator recognises. A failed call or an empty answer drops the note (the caller counts
it); it is never kept blindly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from engine.pool import Artifact, PoolError
from engine.strategy.protocols import Archive, StageView, StrategyEnv

REVISER_MARKER = "evotui-note-reviser:"
MAX_CHANGES = 12
"""Newest pool changes shown (older ones are counted, not listed)."""
NOTE_CHARS = 1500

_KEEP = re.compile(r"^\W*KEEP\b", re.I)
_REVISED = re.compile(r"^\s*\**\s*REVISED\s*\**\s*:\s*\**\s*", re.I | re.M)


@dataclass(frozen=True)
class Change:
    """One thing that happened in the pool since the note was made, as the reviser reads it."""

    label: str
    """An artifact id, or a failed item's id."""
    line: str


def _notes(art: Artifact) -> Mapping[str, object]:
    notes = art.meta.get("notes") if isinstance(art.meta, Mapping) else None
    return notes if isinstance(notes, Mapping) else {}


def _flat(text: object, cap: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= cap else flat[: cap - 3] + "..."


def pool_changes(archive: Archive, version: int) -> list[Change]:
    """Artifacts committed after `version` (each once, newest state), oldest first."""
    seen: dict[str, Change] = {}
    for ch in archive.changes_since(version):
        try:
            art = archive.get(ch.artifact_id)
        except PoolError:
            continue
        parent_score = None
        if art.parent_ids:
            try:
                parent_score = archive.get(art.parent_ids[0]).val_mean
            except PoolError:
                parent_score = None
        notes = _notes(art)
        said = notes.get("summary") or notes.get("plan") or art.meta.get("diff") or ""
        score = f"score {art.val_mean:.6g}" + (f" (parent {parent_score:.6g}, delta {art.val_mean - parent_score:+.4g})"
                                               if parent_score is not None else "")
        parent = f" from {art.parent_ids[0]}" if art.parent_ids else ""
        seen[art.artifact_id] = Change(art.artifact_id, f"{art.artifact_id}{parent}: {score}; {_flat(said)}")
    return list(seen.values())


def reviser_messages(what: str, note: str, version: int, now: int, changes: Iterable[Change],
                     description: str) -> list[dict]:
    listed = list(changes)
    shown = listed[-MAX_CHANGES:]
    system = (f"{REVISER_MARKER} revise a stale {what}\n"
              f"You wrote the {what} below against an older state of an evolutionary search. Read what "
              f"changed since and answer KEEP if the {what} still holds, else `REVISED:` followed by the "
              f"{what} rewritten for the current state: drop what the changes refuted, keep what they "
              "confirmed, same form and length as before.")
    lines = [f"Task: {description.strip()[:800]}", "", f"## The {what} (made at pool version {version}, now {now})",
             note[:NOTE_CHARS], "", f"## Changes since ({len(listed)}, newest {len(shown)} shown)"]
    lines += [f"- {c.line}" for c in shown] or ["(none)"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def parse_revision(reply: str | None, note: str) -> str | None:
    """The revised note (the old one for KEEP), or None for a failed call or an empty answer."""
    if reply is None or not reply.strip():
        return None
    text = reply.strip()
    if _KEEP.match(text):
        return note
    m = _REVISED.search(text)
    revised = (text[m.end():] if m else text).strip()
    return revised[:NOTE_CHARS] if revised else None


async def revise_note(view: StageView, env: StrategyEnv, *, key: str, what: str, stage: str,
                      extra: Iterable[Change] = ()) -> tuple[str | None, int]:
    """(the revised note or None, the pool version it now stands for)."""
    now = env.archive.version
    note = str(view.notes.get(key, ""))
    changes = [*pool_changes(env.archive, view.pool_version), *extra]
    if not changes:
        return note, now  # only status changes since: nothing to revise against, no call
    reply = await env.ask(reviser_messages(what, note, view.pool_version, now, changes, env.description), stage)
    return parse_revision(reply, note), now
