"""Steering acts: what an operator (or the engine, for `use`) did to a live run, one row each.

An act is the unit of the audit trail and of resume: the steering state of a run is exactly the
replay of its acts in act_id order (engine/steering/state.py), so nothing else needs saving.

Operator acts (who asked is `by`: "cli", "tui", "control", "python"):
  guide   text, count = proposals it is shown to (None: until withdrawn)
  unguide target = the guidance's act id (None: every active guidance)
  pin     target = artifact, count = parent picks it takes (None: until unpinned)
  unpin   -
  ban     target = artifact: never picked as a parent again (until unban)
  unban   target = artifact
  reeval  target = artifact, detail = {"heldout": bool} or {"examples": K}; the result is a
          "reevaluated" act (detail: scores) the engine writes when it is done
Engine acts (by "engine"):
  use     target = the act id of the guidance or pin a proposal used, item_id = that proposal
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

OPERATOR_ACTS = ("guide", "unguide", "pin", "unpin", "ban", "unban", "reeval")
ENGINE_ACTS = ("use", "reevaluated")
MAX_GUIDANCE_CHARS = 4000
"""Guidance longer than this is refused (it is a steer, not a document)."""
MAX_COUNT = 1_000_000


class SteerError(ValueError):
    """A refused steering request; the message is one line naming the problem and what to do."""


@dataclass(frozen=True)
class Act:
    act_id: int
    act: str
    by: str
    target: str | None = None
    text: str | None = None
    count: int | None = None
    item_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    def row(self, run_id: str) -> dict[str, Any]:
        """The steering table's row (engine/store/statements.py: STEERING_COLS)."""
        return {"run_id": run_id, "act_id": self.act_id, "act": self.act, "target": self.target, "text": self.text,
                "count": self.count, "item_id": self.item_id, "by": self.by,
                "detail_json": json.dumps(self.detail, sort_keys=True), "created_at": self.created_at}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Act:
        """From store.fetch_rows("steering", ...) (detail_json already decoded to `detail`)."""
        return cls(act_id=int(row["act_id"]), act=str(row["act"]), by=str(row["by"]), target=row.get("target"),
                   text=row.get("text"), count=row.get("count"), item_id=row.get("item_id"),
                   detail=dict(row.get("detail") or {}), created_at=float(row["created_at"]))

    def to_dict(self) -> dict[str, Any]:
        return {"act_id": self.act_id, "act": self.act, "by": self.by, "target": self.target, "text": self.text,
                "count": self.count, "item_id": self.item_id, "detail": dict(self.detail),
                "created_at": self.created_at}

    def describe(self) -> str:
        """One line for logs and the CLI."""
        span = "" if self.count is None else f" for {self.count} proposal{'s' if self.count != 1 else ''}"
        if self.act == "guide":
            text = (self.text or "").replace("\n", " ")
            return f"guidance #{self.act_id}{span or ' until withdrawn'}: {text[:80]}{'...' if len(text) > 80 else ''}"
        if self.act == "unguide":
            return f"guidance #{self.target} withdrawn" if self.target else "all guidance withdrawn"
        if self.act == "pin":
            return f"{self.target} pinned as the parent{span or ' until unpinned'}"
        if self.act == "unpin":
            return f"pin of {self.target} removed"
        if self.act == "ban":
            return f"{self.target} banned as a parent"
        if self.act == "unban":
            return f"{self.target} may be a parent again"
        if self.act == "reeval":
            what = "the held-out set" if self.detail.get("heldout") else f"{self.detail.get('examples')} more examples"
            return f"{self.target} re-evaluation on {what} requested"
        if self.act == "reevaluated":
            return f"{self.target} re-evaluated: {self.detail.get('summary', '')}"
        return f"{self.act} {self.target or ''}".strip()


def positive_count(value: Any, what: str) -> int | None:
    """None (no limit) or an int in 1..MAX_COUNT; SteerError otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise SteerError(f"{what} must be a whole number from 1 to {MAX_COUNT}, not {value!r}")
    return value


def guidance_text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SteerError("guidance must be non-empty text (say what the proposer should try or avoid)")
    text = value.strip()
    if len(text) > MAX_GUIDANCE_CHARS:
        raise SteerError(f"guidance is {len(text)} characters; keep it under {MAX_GUIDANCE_CHARS} "
                         "(the proposer reads it in every request it steers)")
    return text
