"""Frozen data for a loongflow run: program artifacts in three islands, folded by the engine's own
island archive (engine/strategy/islands_view.py), with PES plans and summaries in their meta; and a
contextevolve run's notes (summary, guidance, exemplars) on a prompt artifact."""

from __future__ import annotations

from dataclasses import replace

from engine.strategy.islands_view import IslandsView, build_islands_view
from engine.pool import Artifact
from evotui.tui.backend import ArtifactView
from evotui.tui.caches import IslandsCache
from tests.tui.fakes import FrozenBackend

STRATEGY = {"name": "loongflow", "loongflow": {"islands": 3, "migration_interval": 5, "bins": 3}}
SEED_PROGRAM = "def solve(xs):\n    return xs\n"


def _program(i: int) -> str:
    lines = [f"    # step {k}: keep order {k * i % 7}" for k in range(i % 5)]
    return "def solve(xs):\n" + "\n".join(lines + [f"    return sorted(xs)[:{i}]" if i % 2 else "    return sorted(xs)"]) + "\n"


def frozen_artifacts() -> list[Artifact]:
    arts = [Artifact("a000000", SEED_PROGRAM, (), 1, {"score": 0.10}, status="seed", meta={"metrics": {"score": 0.1}})]
    for i in range(1, 15):
        parent = arts[max(0, i - 3)].artifact_id
        score = round(0.10 + 0.05 * i - 0.03 * (i % 3), 3)
        notes = {"plan": f"Sort the input before slicing it (attempt {i}); keep the signature.",
                 "summary": f"Sorting first raised the score to {score}: the order check passes now."}
        arts.append(Artifact(f"a{i:06d}", _program(i), (parent,), i + 1, {"score": score},
                             meta={"metrics": {"score": score}, "selection": {"island": i % 3, "tau": 0.8},
                                   "notes": notes}))
    return arts


def frozen_islands() -> IslandsView:
    view = build_islands_view(STRATEGY, frozen_artifacts())
    assert view is not None
    return view


class IslandsBackend(FrozenBackend):
    """The frozen dashboard data, with a loongflow run's artifacts and islands."""

    def __init__(self) -> None:
        super().__init__()
        self.strategy = dict(STRATEGY)
        self.arts = frozen_artifacts()
        self._cache = IslandsCache()
        best = max(self.arts, key=lambda a: a.val_mean)
        self.snap = replace(self.snap, best_id=best.artifact_id, best_score=best.val_mean, pool_version=len(self.arts))

    @property
    def has_islands(self) -> bool:
        return self.strategy.get("name") == "loongflow"

    def islands(self) -> IslandsView | None:
        return self._cache.get(len(self.arts), self.strategy, lambda: list(self.arts))

    def artifacts(self) -> list[ArtifactView]:
        return [ArtifactView(a.artifact_id, a.parent_ids[0] if a.parent_ids else None, a.created_version, a.status,
                             a.val_mean, a.text, "", a.meta) for a in self.arts]


CONTEXT_NOTES = {
    "summary": "NEW: joins the items with ' ; ' and writes them in lower case.\n"
               "PRESERVES: the single-line list format of the seed.",
    "guidance": "Children that kept the ' ; ' rule scored higher; add one formatting rule at a time.",
    "guidance_version": "3",
    "exemplars": "- a000004 (score 0.293): joins with ' ; '\n  change: +1 line (the separator rule)\n"
                 "- a000011 (score 0.101): asks for brevity",
}


class ContextEvolveBackend(FrozenBackend):
    """A contextevolve run's artifacts: the best carries a NEW/PRESERVES summary, the guidance and
    the exemplars its proposer was given."""

    def artifacts(self) -> list[ArtifactView]:
        arts = super().artifacts()
        return [replace(a, meta={"selection": {"tournament": 3}, "notes": CONTEXT_NOTES})
                if a.artifact_id == "a000016" else a for a in arts]
