"""GEPA selection: per-example Pareto front over validation scores.

A candidate is on the front of an example when it reaches that example's best score. Candidates
whose every front also holds another surviving candidate are dominated and dropped (lowest mean
first). A parent is sampled among the survivors, weighted by how many examples' fronts they sit on.

The engine reads the fronts from a `ParetoFronts` index the pool keeps current on every change
(`front_weights`), so selecting a parent costs O(examples), not O(pool x examples): a run's
engine overhead per proposal stays flat as the pool grows.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from typing import Callable, Iterable, Mapping, Sequence

from engine.pool import Artifact, Pool, is_confirmed, is_live


def example_fronts(artifacts: Sequence[Artifact], example_ids: Sequence[str]) -> list[set[str]]:
    fronts: list[set[str]] = []
    for ex in example_ids:
        best = max((a.val_scores.get(ex, 0.0) for a in artifacts), default=0.0)
        fronts.append({a.artifact_id for a in artifacts if a.val_scores.get(ex, 0.0) >= best})
    return fronts


def pareto_weights(artifacts: Sequence[Artifact], example_ids: Sequence[str]) -> dict[str, int]:
    """artifact_id -> number of example fronts it is on, non-dominated artifacts only.

    Rebuilds the fronts from scratch, O(artifacts x examples); an engine asks `front_weights`,
    which reads the pool's incrementally maintained fronts and gives the same result."""
    return ParetoFronts(example_ids, _always, artifacts).weights()


def front_weights(pool: Pool, example_ids: Sequence[str], *, confirmed: bool = False) -> dict[str, int]:
    """`pareto_weights(pool.live() or pool.confirmed(), example_ids)`, read from fronts the pool
    keeps current on every change: O(examples) per call (amortised) instead of O(pool)."""
    member = is_confirmed if confirmed else is_live
    ids = tuple(example_ids)
    fronts = pool.index(("pareto", "confirmed" if confirmed else "live", ids),
                        lambda arts: ParetoFronts(ids, member, arts))
    assert isinstance(fronts, ParetoFronts)
    return fronts.weights()


def _always(_: Artifact) -> bool:
    return True


Key = tuple[float, int, int]
"""(val_mean, created_version, pool order): the pruning order, lowest first."""


class _Bucket:
    """The artifacts holding one score on one example, with a lazy max-heap of their keys."""

    __slots__ = ("members", "heap")

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.heap: list[tuple[float, int, int, str]] = []  # negated keys


class ParetoFronts:
    """Per-example Pareto fronts of the artifacts `member` accepts, updated one artifact at a time.

    Per example position: a bucket per held score, a lazy max-heap of the held scores and the best
    one; per artifact on some front, the positions it is best on. A change costs
    O(examples x log) plus the fronts it pushes artifacts off (amortised: each joined once).

    `weights()` needs only each front's top (highest key) member, so it costs O(examples), not
    O(pool): pruning walks the candidates in ascending key order and drops one when each of its
    fronts still holds another live candidate. A candidate that is not its front's top always has
    a later one beside it, so only tops can survive, and a top survives iff one of the fronts it
    tops holds no earlier survivor (the from-scratch rule, see `pareto_weights`).
    """

    def __init__(self, example_ids: Sequence[str], member: Callable[[Artifact], bool],
                 artifacts: Iterable[Artifact] = ()) -> None:
        # Positions, not ids: a repeated example id counts twice, as in the from-scratch fronts.
        self.example_ids = tuple(example_ids)
        self._member = member
        n = len(self.example_ids)
        self._seq: dict[str, int] = {}  # first-seen (pool) order: the stable sort's last tie-break
        self._scores: dict[str, tuple[float, ...]] = {}
        self._key: dict[str, Key] = {}
        self._buckets: list[dict[float, _Bucket]] = [{} for _ in range(n)]
        self._heaps: list[list[float]] = [[] for _ in range(n)]  # negated held scores, lazy
        self._best: list[float | None] = [None] * n
        self._on_front: dict[str, set[int]] = {}
        for art in artifacts:
            self.apply(art)

    def __len__(self) -> int:
        return len(self._scores)

    def apply(self, artifact: Artifact) -> None:
        """Take in an artifact's new state (added, rescored or status changed)."""
        aid = artifact.artifact_id
        self._seq.setdefault(aid, len(self._seq))
        if aid in self._scores:
            self._discard(aid)
        if self._member(artifact):
            self._insert(artifact)

    def _insert(self, art: Artifact) -> None:
        aid = art.artifact_id
        scores = tuple(art.val_scores.get(ex, 0.0) for ex in self.example_ids)
        key = self._key[aid] = (art.val_mean, art.created_version, self._seq[aid])
        entry = (-key[0], -key[1], -key[2], aid)
        self._scores[aid] = scores
        mine: set[int] = set()
        for i, score in enumerate(scores):
            buckets = self._buckets[i]
            bucket = buckets.get(score)
            if bucket is None:
                bucket = buckets[score] = _Bucket()
                heapq.heappush(self._heaps[i], -score)
            bucket.members.add(aid)
            heapq.heappush(bucket.heap, entry)
            best = self._best[i]
            if best is None or score > best:
                if best is not None:  # the old best scorers leave this front
                    for other in buckets[best].members:
                        self._leave(other, i)
                self._best[i] = score
                mine.add(i)
            elif score == best:
                mine.add(i)
        if mine:
            self._on_front[aid] = mine

    def _discard(self, aid: str) -> None:
        scores = self._scores.pop(aid)
        del self._key[aid]  # its heap entries go stale and are dropped when they surface
        self._on_front.pop(aid, None)
        for i, score in enumerate(scores):
            buckets = self._buckets[i]
            bucket = buckets[score]
            bucket.members.discard(aid)
            if bucket.members:
                continue
            del buckets[score]
            if score != self._best[i]:
                continue
            # The last best scorer left: the next held score takes over.
            heap = self._heaps[i]
            while heap and -heap[0] not in buckets:
                heapq.heappop(heap)
            self._best[i] = -heap[0] if heap else None
            if heap:
                for other in buckets[-heap[0]].members:
                    self._on_front.setdefault(other, set()).add(i)

    def _leave(self, aid: str, i: int) -> None:
        mine = self._on_front[aid]
        mine.discard(i)
        if not mine:
            del self._on_front[aid]

    def _top(self, bucket: _Bucket) -> str:
        heap, keys = bucket.heap, self._key
        while True:  # an entry is current if its artifact is still here under the same key
            neg_mean, neg_version, neg_seq, aid = heap[0]
            if aid in bucket.members and keys.get(aid) == (-neg_mean, -neg_version, -neg_seq):
                return aid
            heapq.heappop(heap)

    def weights(self) -> dict[str, int]:
        """artifact_id -> number of fronts it is on, dominated ones pruned lowest key first."""
        if not self._scores:
            return {}
        if not self.example_ids:  # no fronts: pruning leaves only the last in sort order
            return {max(self._key, key=self._key.__getitem__): 1}
        tops: dict[str, list[int]] = {}
        for i, best in enumerate(self._best):
            assert best is not None  # every member scores (0 if unscored) on every example
            tops.setdefault(self._top(self._buckets[i][best]), []).append(i)
        covered: set[int] = set()  # fronts that already hold a survivor
        weights: dict[str, int] = {}
        for aid in sorted(tops, key=self._key.__getitem__):
            if not covered.issuperset(tops[aid]):
                mine = self._on_front[aid]
                weights[aid] = len(mine)
                covered |= mine
        return weights


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
        # The generator too: without it a resumed run's next epoch repeats the first shuffle.
        return {"order": self.order, "pos": self.pos, "rng": rng_state(self.rng)}

    def restore(self, state: dict) -> None:
        self.order = list(state.get("order", []))
        self.pos = int(state.get("pos", 0))
        if state.get("rng") is not None:  # a state saved before the generator was kept has none
            restore_rng(self.rng, state["rng"])


def item_rng(seed: int, item_id: str | None, purpose: str) -> random.Random:
    """A generator of one item's draws (its inspirations), from (run seed, item, purpose) alone:
    the run's generator then moves only between items, where its state is saved, so an item
    resumed past the stage that drew leaves it where the uninterrupted run left it."""
    key = hashlib.blake2b(f"{seed}/{item_id or '-'}/{purpose}".encode(), digest_size=16).digest()
    return random.Random(int.from_bytes(key, "big"))


def rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def restore_rng(rng: random.Random, state: list) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))
