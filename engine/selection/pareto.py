"""GEPA selection: per-example Pareto front over validation scores.

A candidate is on the front of an example when it reaches that example's best score. Candidates
whose every front also holds another surviving candidate are dominated and dropped (lowest mean
first). A parent is sampled among the survivors, weighted by how many examples' fronts they sit on.
"""

from __future__ import annotations

import random
from typing import Mapping, Sequence

from engine.pool import Artifact


def example_fronts(artifacts: Sequence[Artifact], example_ids: Sequence[str]) -> list[set[str]]:
    fronts: list[set[str]] = []
    for ex in example_ids:
        best = max((a.val_scores.get(ex, 0.0) for a in artifacts), default=0.0)
        fronts.append({a.artifact_id for a in artifacts if a.val_scores.get(ex, 0.0) >= best})
    return fronts


def pareto_weights(artifacts: Sequence[Artifact], example_ids: Sequence[str]) -> dict[str, int]:
    """artifact_id -> number of example fronts it is on, non-dominated artifacts only."""
    if not artifacts:
        return {}
    fronts = example_fronts(artifacts, example_ids)
    alive = set().union(*fronts) if fronts else {a.artifact_id for a in artifacts}
    by_mean = sorted((a for a in artifacts if a.artifact_id in alive), key=lambda a: (a.val_mean, a.created_version))
    for cand in by_mean:
        mine = [f for f in fronts if cand.artifact_id in f]
        if len(alive) > 1 and all(len((f & alive) - {cand.artifact_id}) > 0 for f in mine):
            alive.discard(cand.artifact_id)
    weights = {aid: sum(1 for f in fronts if aid in f) for aid in alive}
    return {aid: w for aid, w in weights.items() if w > 0} or {aid: 1 for aid in alive}


def sample_parent(weights: Mapping[str, int], rng: random.Random) -> str:
    ids = sorted(weights)
    return rng.choices(ids, weights=[weights[i] for i in ids], k=1)[0]


class MinibatchSampler:
    """Epoch-shuffled minibatches over the training ids (GEPA's default sampler).

    Its whole state is JSON-serialisable so a resumed run continues the same sequence.
    """

    def __init__(self, example_ids: Sequence[str], size: int, rng: random.Random) -> None:
        if not example_ids:
            raise ValueError("the training split is empty")
        self.ids = list(example_ids)
        self.size = min(size, len(self.ids))
        self.rng = rng
        self.order: list[str] = []
        self.pos = 0

    def next(self) -> list[str]:
        batch: list[str] = []
        while len(batch) < self.size:
            if self.pos >= len(self.order):
                self.order = list(self.ids)
                self.rng.shuffle(self.order)
                self.pos = 0
            cand = self.order[self.pos]
            self.pos += 1
            if cand not in batch:
                batch.append(cand)
        return batch

    def state(self) -> dict:
        return {"order": self.order, "pos": self.pos}

    def restore(self, state: dict) -> None:
        self.order = list(state.get("order", []))
        self.pos = int(state.get("pos", 0))


def rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def restore_rng(rng: random.Random, state: list) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))
