"""Changes already tried on a program, shown to the proposer when that program is the parent again.

Why: steps that start from one program propose the same few edits over and over. In mode chain
every chain starts from the shared head; in any mode a strong parent is picked again and again.
A repeat costs an LLM call and is then turned away as a duplicate, or it cannot join a head that
already holds it; on circle_packing at 48 proposals these were about one step in seven. Showing
the proposer what was tried from this parent and how it went (as AlphaEvolve and FunSearch show
earlier attempts) lets it propose something else, and tells it which directions lost score.

The record lives in the run state (ProgramCounters.tried), so a resumed run's requests are the
ones the uninterrupted run would have sent. It is bounded: the latest `shown` changes of each of
the latest PARENTS_KEPT parents.
"""

from __future__ import annotations

from typing import Iterable

from engine.items import WorkItem
from engine.stages.program_prompt import clip, fmt_score

IN_FLIGHT = "not evaluated yet: another step made this change and waits for its evaluation"
PARENTS_KEPT = 32
"""Parents whose tried changes are kept (the oldest parent's go first)."""
OUTCOME_CHARS = 200


class TriedChanges:
    """Per parent, the latest changes tried on it: [diff, outcome] pairs, oldest first."""

    def __init__(self, store: dict[str, list[list[str]]], shown: int) -> None:
        self.store = store
        """The run state's dict (ProgramCounters.tried), kept in place so a save sees it."""
        self.shown = shown

    def note(self, item: WorkItem, outcome: str) -> None:
        """Record the item's change on the parent it was evaluated (or turned away) against."""
        diff = item.proposal.diff if item.proposal is not None else None
        if self.shown <= 0 or not diff or not item.parent_id:
            return
        entries = self.store.pop(item.parent_id, [])  # re-inserted: the dict's order is recency
        entries.append([diff, clip(outcome.strip(), OUTCOME_CHARS)])
        self.store[item.parent_id] = entries[-self.shown:]
        while len(self.store) > PARENTS_KEPT:
            del self.store[next(iter(self.store))]

    def scored(self, item: WorkItem, score: float | None, parent_score: float | None) -> None:
        self.note(item, f"scored {fmt_score(score)} (the current program scores {fmt_score(parent_score)})")

    def for_parent(self, parent_id: str, in_flight: Iterable[WorkItem] = ()) -> list[tuple[str, str]]:
        """(diff, outcome) pairs, at most `shown` (a resume may have lowered it) of the changes
        tried, then at most `shown` of those other items in flight made on the same program and
        have not ended: with several chains or workers on one head, a third of the repeats
        repeated a change still waiting for its evaluation."""
        if self.shown <= 0:
            return []
        pending = [(item.proposal.diff, IN_FLIGHT) for item in in_flight
                   if item.parent_id == parent_id and item.outcome is None and item.merge is None
                   and item.proposal is not None and item.proposal.diff]
        return [(d, o) for d, o in self.store.get(parent_id, [])[-self.shown:]] + pending[-self.shown:]
