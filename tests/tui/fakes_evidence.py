"""Frozen data with review evidence, strategy notes and program artifacts, and a backend that
takes review decisions (for the cursor tests)."""

from __future__ import annotations

import time
from typing import Any

from engine.pipeline.review import PendingReview
from evotui.tui.backend import ArtifactView, ReviewEvidence
from tests.tui.fakes import BETTER, CHILD, SEED, FrozenBackend, frozen_app

NOTES = {"plan": "Ask for lower case; keep the separator rule.",
         "guidance": "Children that kept the ' ; ' rule scored higher on the minibatch."}


class EvidenceBackend(FrozenBackend):
    """Pending items with scores, staleness decisions and notes; artifacts with meta."""

    def evidence(self, item_id: str) -> ReviewEvidence | None:
        if item_id == "i000033":
            return ReviewEvidence(child_mb=(1.0, 0.5, 1.0, 0.5), parent_mb=(0.5, 0.5, 1.0, 0.0),
                                  parent_score=0.539, gaps={"propose": 0, "evaluate": 1},
                                  staleness=("propose gap 0 -> pass", "evaluate gap 1 -> pass: gap 1 <= max gap 2"),
                                  notes=NOTES, tags={"island": 2})
        return ReviewEvidence(parent_score=0.293, gaps={"propose": 0})

    def artifacts(self) -> list[ArtifactView]:
        return [
            ArtifactView("a000000", None, 1, "seed", 0.032, SEED),
            ArtifactView("a000004", "a000000", 2, "confirmed", 0.293, CHILD, "approve at evaluate",
                         {"selection": {"island": 1}}),
            ArtifactView("a000016", "a000004", 9, "confirmed", 0.539, BETTER, "edit at evaluate",
                         {"selection": {"island": 2}, "notes": NOTES}),
            ArtifactView("a000011", "a000000", 5, "confirmed", 0.101, SEED + "\nBe brief.", ""),
        ]


PROGRAM = "def solve(xs):\n    return sorted(xs)\n"


class ProgramBackend(FrozenBackend):
    """Program artifacts: a 0.000 child is accepted into the population without being a new best."""

    def artifacts(self) -> list[ArtifactView]:
        m = {"metrics": {"score": 0.0}}
        return [
            ArtifactView("a000000", None, 1, "seed", 0.2, PROGRAM, "", {"metrics": {}}),
            ArtifactView("a000003", "a000000", 2, "confirmed", 0.0, PROGRAM.replace("sorted(xs)", "xs"), "", m),
            ArtifactView("a000016", "a000000", 3, "confirmed", 0.539, PROGRAM.replace("xs)", "xs, key=abs)"), "",
                         {"metrics": {"score": 0.539}, "notes": {"summary": "sort by magnitude"}}),
        ]


    def pending(self) -> list[PendingReview]:
        now = self.clock()
        better = PROGRAM.replace("xs)", "xs, key=abs)")
        return [PendingReview("i000041", "evaluate", "a000016", better, better.replace("key=abs", "key=abs, reverse=True"),
                              now - 42),
                PendingReview("i000042", "evaluate", "a000000", PROGRAM, PROGRAM.replace("sorted(xs)", "sorted(set(xs))"),
                              now - 7)]


class DecidingBackend(FrozenBackend):
    """Takes decide commands: approve/reject remove the item, skip sends it to the back."""

    can_control = True

    def __init__(self, n: int = 5) -> None:
        super().__init__()
        now = time.time()
        self.items = [PendingReview(f"i0000{40 + k}", "evaluate", "a000016", BETTER, BETTER + f"\nRule {k}.", now - 10 * k)
                      for k in range(n)]

    def pending(self) -> list[PendingReview]:
        return list(self.items)

    async def control(self, cmd: str, **args: Any) -> Any:
        assert cmd == "decide", cmd
        item = next(p for p in self.items if p.item_id == args["item_id"])
        self.items.remove(item)
        if args["decision"] == "skip":
            self.items.append(item)
        return None


def app_with(backend: FrozenBackend):
    app = frozen_app()
    app.backend = backend
    app.sampler.backend = backend
    return app
