"""Queue items: one attempt of one evolution step as it moves through the stages."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkItem:
    """Mutable while in flight; only the stage that holds it touches it.

    `created_version` is the pool version the item was selected from; the version gap is
    computed by whoever consumes the item (pool.version - created_version).
    `payload` holds what earlier stages produced (traces, the child text, scores) and is
    persisted at every stage boundary so an interrupted run re-enqueues it where it was.
    """

    item_id: str
    created_version: int
    parent_id: str
    minibatch: list[str]
    stage: str
    created_at: float
    payload: dict = field(default_factory=dict)
    enqueued_at: float = 0.0
    tokens: int = 0
    """Tokens spent on this item so far (wasted if it is discarded)."""

    def end(self, outcome: str, reason: str = "") -> None:
        """Record how the item ended; the stage that returns None after this reports it."""
        self.payload["outcome"] = outcome
        if reason:
            self.payload["reason"] = reason

    def to_payload(self) -> dict:
        return {"minibatch": self.minibatch, "tokens": self.tokens, **self.payload}

    @classmethod
    def from_row(cls, row: dict) -> "WorkItem":
        payload = dict(row.get("payload") or {})
        minibatch = list(payload.pop("minibatch", []))
        tokens = int(payload.pop("tokens", 0))
        return cls(
            item_id=row["item_id"],
            created_version=int(row["created_version"]),
            parent_id=row["parent_artifact_id"],
            minibatch=minibatch,
            stage=row["stage"],
            created_at=float(row["created_at"]),
            payload=payload,
            tokens=tokens,
        )
