"""Queue items: one attempt of one evolution step as it moves through the stages.

An item's kind is a typed field with typed sub-records (a merge's parents, a chain link, a
speculative pool entry), never a payload key to test for; what its stages produce travels as
typed products (engine/items/products.py) and its course through the pipeline as typed fields.
Stored rows keep the old flat payload layout, so items saved by earlier releases resume unchanged.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.items.products import (GateScores, ProgramEvaluation, Proposal, RepairDecision, Rollout, RolloutRelease,
                                   Validation, from_stored, stored_keys, to_stored)

ItemKind = Literal["proposal", "merge"]

current_item: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_item", default=None)
"""The item whose handler is running in this task: LLM calls and metric calls are charged to it."""


@dataclass(frozen=True)
class MergeOf:
    """A merge item: two pool artifacts and their common ancestor."""

    ours: str
    theirs: str
    base: str

    def to_dict(self) -> dict:
        return {"ours": self.ours, "theirs": self.theirs, "base": self.base}


@dataclass
class ChainLink:
    """mode chain: the head an item improves and its place in the chain (engine/capabilities/gated_chain.py)."""

    head_text: str
    head_seq: int
    head_chain: list[str]
    chain_of: str = ""
    """The item whose gate started this one ("" for an item admitted at rollout)."""
    gated: bool = False
    """Passed its gate and only awaits validation: it no longer holds a proposal slot."""

    KEYS = ("head_text", "head_seq", "head_chain", "chain_of", "gated")

    def to_dict(self) -> dict:
        out = {"head_text": self.head_text, "head_seq": self.head_seq, "head_chain": list(self.head_chain)}
        if self.chain_of:
            out["chain_of"] = self.chain_of
        if self.gated:
            out["gated"] = True
        return out

    @classmethod
    def from_payload(cls, payload: dict) -> "ChainLink | None":
        if "head_text" not in payload:
            return None
        return cls(str(payload["head_text"]), int(payload.get("head_seq", 0)),
                   [str(i) for i in payload.get("head_chain", [])], str(payload.get("chain_of", "")),
                   bool(payload.get("gated", False)))


@dataclass(frozen=True)
class SpeculativeEntry:
    """The speculative artifact an item inserted after its validation prefix."""

    artifact_id: str
    threshold: float
    version: int

    def to_dict(self) -> dict:
        return {"id": self.artifact_id, "threshold": self.threshold, "version": self.version}


@dataclass
class WorkItem:
    """Mutable while in flight; only the stage that holds it touches it.

    `created_version` is the pool version the item was selected from; the version gap is
    computed by whoever consumes the item (pool.version - created_version).
    The item is persisted at every stage boundary so an interrupted run re-enqueues it where it was.
    """

    item_id: str
    created_version: int
    parent_id: str
    minibatch: list[str]
    stage: str
    created_at: float
    unknown_keys: dict = field(default_factory=dict)
    """Stored payload keys no typed field holds, written by another release: kept, so a resume
    writes them back. A typed key here is refused (to_payload)."""
    enqueued_at: float = 0.0
    tokens: int = 0
    """Tokens spent on this item so far (wasted if it is discarded)."""
    merge: MergeOf | None = None
    chain: ChainLink | None = None
    speculative: SpeculativeEntry | None = None
    tags: dict = field(default_factory=dict)
    """The selector's tags (engine/strategy/protocols.py: Pick), for the archive at commit."""
    # -- its course through the pipeline (stored under the keys in LOG_KEYS) ---------------
    outcome: str | None = None
    """How it ended (accepted, rejected, failed, discarded_stale, ...); None while in flight."""
    reason: str | None = None
    """Why it ended, or why its proposal failed."""
    charged: Literal["made", "failed"] | None = None
    """Its proposal was charged (stored as `proposal`): a resume goes on without a new call."""
    gaps: dict[str, int] = field(default_factory=dict)
    """Stage -> the version gap when the stage took it."""
    started_at: float | None = None
    parked_at: float | None = None
    reviewed: dict[str, str] = field(default_factory=dict)
    """Review gate -> the reviewer's decision."""
    reflected_at: int | None = None
    """The pool version the reflect stage checked it against (not sent back to reflect)."""
    parent_removed: str | None = None
    """The speculative parent it was made from, removed since (engine/capabilities/speculation.py)."""
    artifact_id: str | None = None
    """The artifact it committed."""
    notes: dict[str, str] | None = None
    """The strategy's notes for it (guidance, plan, critique, ...): its stages read them, the
    committed child's meta keeps them."""
    # -- the stages' typed products (engine/items/products.py) -----------------------------
    rollout: Rollout | None = None
    proposal: Proposal | None = None
    gate: GateScores | None = None
    validation: Validation | None = None
    evaluation: ProgramEvaluation | None = None
    rollout_release: RolloutRelease | None = None
    repair: RepairDecision | None = None

    @property
    def kind(self) -> ItemKind:
        return "merge" if self.merge is not None else "proposal"

    @property
    def is_merge(self) -> bool:
        return self.merge is not None

    @property
    def holds_proposal_slot(self) -> bool:
        """Counts against max_in_flight: not a merge, not a chain head past its gate."""
        return self.merge is None and not (self.chain is not None and self.chain.gated)

    def end(self, outcome: str, reason: str = "") -> None:
        """Record how the item ended; the stage that returns None after this reports it."""
        self.outcome = outcome
        if reason:
            self.reason = reason

    def amend_proposal(self, **changes) -> Proposal:
        """Its proposal with `changes` (field names of Proposal), made if there was none yet."""
        self.proposal = replace(self.proposal or Proposal(), **changes)
        return self.proposal

    def amend_evaluation(self, **changes) -> ProgramEvaluation:
        """Its program evaluation with `changes` (field names of ProgramEvaluation)."""
        self.evaluation = replace(self.evaluation or ProgramEvaluation(), **changes)
        return self.evaluation

    def why(self, default: str) -> str:
        """Its reason, or `default` when none was given."""
        return self.reason if self.reason is not None else default

    def to_payload(self) -> dict:
        """The flat stored layout (engine/store): the typed fields under the keys earlier releases used."""
        typed = TYPED_KEYS.intersection(self.unknown_keys)
        if typed:  # saved twice under one key, it would be read back wrong
            raise ValueError(f"item {self.item_id}: unknown_keys {sorted(typed)} are typed fields "
                             "(engine/items/products.py); set them there")
        out = {"minibatch": self.minibatch, "tokens": self.tokens, **self.unknown_keys}
        if self.merge is not None:
            out["merge"] = self.merge.to_dict()
        if self.chain is not None:
            out.update(self.chain.to_dict())
        if self.speculative is not None:
            out["speculative"] = self.speculative.to_dict()
        if self.tags:
            out["selection"] = dict(self.tags)
        for attr, key in LOG_KEYS.items():
            value = getattr(self, attr)
            if value is not None and value != {}:
                out[key] = value
        for product in self._products():
            out.update(to_stored(product))
        for attr, key in RECORD_KEYS.items():
            if getattr(self, attr) is not None:
                out[key] = getattr(self, attr).to_record()
        return out

    def _products(self) -> list:
        return [p for p in (self.rollout, self.proposal, self.gate, self.validation, self.evaluation) if p is not None]

    @classmethod
    def from_row(cls, row: dict) -> "WorkItem":
        payload = dict(row.get("payload") or {})
        minibatch = list(payload.pop("minibatch", []))
        tokens = int(payload.pop("tokens", 0))
        chain = ChainLink.from_payload(payload)
        for key in ChainLink.KEYS:
            payload.pop(key, None)
        m = payload.pop("merge", None)
        s = payload.pop("speculative", None)
        tags = dict(payload.pop("selection", None) or {})
        products = {"rollout": from_stored(Rollout, payload), "proposal": from_stored(Proposal, payload),
                    "gate": from_stored(GateScores, payload),
                    "validation": from_stored(Validation, payload),
                    "evaluation": from_stored(ProgramEvaluation, payload)}
        log = {attr: payload.pop(key) for attr, key in LOG_KEYS.items() if key in payload}
        records = {attr: RECORD_CLASSES[attr].from_record(payload.pop(key))
                   for attr, key in RECORD_KEYS.items() if key in payload}
        return cls(
            item_id=row["item_id"],
            created_version=int(row["created_version"]),
            parent_id=row["parent_artifact_id"],
            minibatch=minibatch,
            stage=row["stage"],
            created_at=float(row["created_at"]),
            unknown_keys=payload,
            tokens=tokens,
            merge=MergeOf(str(m["ours"]), str(m["theirs"]), str(m["base"])) if m else None,
            chain=chain,
            speculative=SpeculativeEntry(str(s["id"]), float(s["threshold"]), int(s["version"])) if s else None,
            tags=tags,
            **products,
            **log,
            **records,
        )


LOG_KEYS = {"outcome": "outcome", "reason": "reason", "charged": "proposal", "gaps": "gaps",
            "started_at": "started_at", "parked_at": "parked_at", "reviewed": "reviewed",
            "reflected_at": "reflected_at", "parent_removed": "parent_removed", "artifact_id": "artifact_id",
            "notes": "notes"}
"""WorkItem attribute -> its key in the stored payload (unset ones are not stored)."""
RECORD_KEYS = {"rollout_release": "speculative_rollout", "repair": "repair"}
"""WorkItem attribute -> the stored key of a product kept as one record (its to_record())."""
RECORD_CLASSES = {"rollout_release": RolloutRelease, "repair": RepairDecision}

TYPED_KEYS = frozenset({"minibatch", "tokens", "merge", "speculative", "selection", *ChainLink.KEYS, *LOG_KEYS.values(),
                        *RECORD_KEYS.values(),
                        *(key for cls in (Rollout, Proposal, GateScores, Validation, ProgramEvaluation) for key in stored_keys(cls))})
"""Stored keys that typed fields hold: never in `unknown_keys`."""
