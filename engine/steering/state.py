"""A run's steering state: the replay of its acts (acts.py), and the checks a new act must pass.

Pure: no I/O, no clock. `apply` is the only mutator, used alike for a live act and for each row
read back on resume, so a resumed run has the same guidance, pins and bans, with the same
proposals left, as the run had when it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.pool import Pool, is_confirmed, is_live
from engine.steering.acts import Act, SteerError, guidance_text, positive_count


@dataclass
class Guidance:
    act_id: int
    text: str
    left: int | None  # proposals still to be shown it; None: until withdrawn
    by: str
    created_at: float


@dataclass
class Pin:
    act_id: int
    artifact_id: str
    left: int | None  # parent picks still to take it; None: until unpinned


class SteeringState:
    def __init__(self, acts: Iterable[Act] = ()) -> None:
        self.acts: list[Act] = []
        self.guidance: dict[int, Guidance] = {}
        """Active guidance by act id, oldest first."""
        self.texts: dict[int, str] = {}
        """Every guidance text ever given (a resumed proposal that used one that has since run out
        is shown it again: it is the same proposal)."""
        self.used: dict[str, list[int]] = {}
        """item id -> the guidance act ids it was shown, in order."""
        self.pin: Pin | None = None
        self.bans: dict[str, int] = {}
        """Banned artifact -> the act id that banned it."""
        self.reevals: dict[int, Act] = {}
        """Requested re-evaluations not yet done, by act id."""
        for act in acts:
            self.apply(act)

    @property
    def next_id(self) -> int:
        return self.acts[-1].act_id + 1 if self.acts else 1

    # -- the one mutator -------------------------------------------------------------------------
    def apply(self, act: Act) -> None:
        self.acts.append(act)
        kind = act.act
        if kind == "guide":
            self.guidance[act.act_id] = Guidance(act.act_id, act.text or "", act.count, act.by, act.created_at)
            self.texts[act.act_id] = act.text or ""
        elif kind == "unguide":
            if act.target is None:
                self.guidance.clear()
            else:
                self.guidance.pop(int(act.target), None)
        elif kind == "pin":
            self.pin = Pin(act.act_id, str(act.target), act.count)
        elif kind == "unpin":
            self.pin = None
        elif kind == "ban":
            self.bans[str(act.target)] = act.act_id
            if self.pin is not None and self.pin.artifact_id == act.target:
                self.pin = None  # a banned artifact is never a parent, pinned or not
        elif kind == "unban":
            self.bans.pop(str(act.target), None)
        elif kind == "reeval":
            self.reevals[act.act_id] = act
        elif kind == "reevaluated":
            self.reevals.pop(int(act.detail.get("request", -1)), None)
        elif kind == "use":
            self._use(int(act.target or 0), act.item_id)

    def _use(self, ref: int, item_id: str | None) -> None:
        g = self.guidance.get(ref)
        if g is not None:
            if item_id is not None:
                self.used.setdefault(item_id, []).append(ref)
            if g.left is not None:
                g.left -= 1
                if g.left <= 0:
                    del self.guidance[ref]
            return
        pin = self.pin
        if pin is not None and pin.act_id == ref and pin.left is not None:
            pin.left -= 1
            if pin.left <= 0:
                self.pin = None

    # -- reads ------------------------------------------------------------------------------
    def new_for(self, item_id: str) -> list[int]:
        """Active guidance this proposal has not been shown yet (each showing is a `use` act)."""
        seen = set(self.used.get(item_id, ()))
        return [gid for gid in self.guidance if gid not in seen]

    def view(self) -> dict[str, Any]:
        """What is in force, for the control socket, the CLI and the TUI."""
        return {
            "guidance": [{"act_id": g.act_id, "text": g.text, "left": g.left, "by": g.by, "created_at": g.created_at}
                         for g in self.guidance.values()],
            "pin": None if self.pin is None else {"act_id": self.pin.act_id, "artifact_id": self.pin.artifact_id,
                                                  "left": self.pin.left},
            "bans": sorted(self.bans),
            "reevals": [a.to_dict() for a in self.reevals.values()],
            "acts": len([a for a in self.acts if a.act not in ("use",)]),
        }

    # -- checks of a new operator act (SteerError names the problem) ----------------------------
    def check(self, req: dict[str, Any], pool: Pool) -> dict[str, Any]:
        """The fields of the act `req` asks for ({"act": ..., "target"/"text"/"count"/"detail"}),
        checked against this state and the run's pool."""
        act = req.get("act")
        if act == "guide":
            return {"text": guidance_text(req.get("text")), "count": positive_count(req.get("count"), "--for")}
        if act == "unguide":
            return self._check_unguide(req.get("target"))
        if act == "unpin":
            if self.pin is None:
                raise SteerError("no candidate is pinned; nothing to unpin")
            return {"target": self.pin.artifact_id}
        if act not in ("pin", "ban", "unban", "reeval"):
            raise SteerError(f"unknown steering act {act!r}; one of guide, unguide, pin, unpin, ban, unban, reeval")
        target = req.get("target")
        if not isinstance(target, str) or target not in pool:
            raise SteerError(f"no candidate {target!r} in this run; its candidates are listed by `evotui show RUN` "
                             "and on the lineage screen")
        art = pool.get(target)
        if act == "pin":
            if not is_confirmed(art):
                raise SteerError(f"{target} is {art.status}: only a fully validated candidate can be pinned as a parent")
            if target in self.bans:
                raise SteerError(f"{target} is banned; unban it first (`steer unban {target}`)")
            return {"target": target, "count": positive_count(req.get("count"), "--for")}
        if act == "ban":
            if target in self.bans:
                raise SteerError(f"{target} is already banned")
            left = [a for a in pool.artifacts() if is_live(a) and a.artifact_id != target and a.artifact_id not in self.bans]
            if not any(is_confirmed(a) for a in left):
                raise SteerError(f"banning {target} would leave no validated candidate to pick parents from")
            return {"target": target}
        if act == "unban":
            if target not in self.bans:
                raise SteerError(f"{target} is not banned")
            return {"target": target}
        return {"target": target, "detail": _reeval_detail(req, art)}

    def _check_unguide(self, target: Any) -> dict[str, Any]:
        if not self.guidance:
            raise SteerError("no guidance is active; nothing to withdraw")
        if target is None:
            return {"target": None}
        try:
            gid = int(target)
        except (TypeError, ValueError):
            raise SteerError(f"a guidance is named by its number (#N in `steer status`), not {target!r}") from None
        if gid not in self.guidance:
            active = ", ".join(f"#{g}" for g in self.guidance)
            raise SteerError(f"guidance #{gid} is not active (active: {active})")
        return {"target": str(gid)}


def _reeval_detail(req: dict[str, Any], art) -> dict[str, Any]:
    if not is_confirmed(art):
        raise SteerError(f"{art.artifact_id} is {art.status}: only a validated candidate can be re-evaluated")
    heldout, examples = bool(req.get("heldout")), req.get("examples")
    if heldout == (examples is not None):
        raise SteerError("re-evaluate on either the held-out set (--heldout) or K more examples (--examples K)")
    if heldout:
        return {"heldout": True}
    return {"examples": positive_count(examples, "--examples")}
