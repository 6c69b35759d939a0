"""Incremental Pareto fronts and best/leader indexes equal the from-scratch computation.

`reference_weights` is the original O(artifacts x examples) `pareto_weights`, kept verbatim here
so the incremental version is held to its exact results (ties, dominance pruning, sort order),
which is what keeps a seeded run's parent selections identical.
"""

from __future__ import annotations

import random
from typing import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pool import Artifact, Pool, PoolChange, top_of
from engine.selection.pareto import ParetoFronts, example_fronts, front_weights, pareto_weights


def reference_weights(artifacts: Sequence[Artifact], example_ids: Sequence[str]) -> dict[str, int]:
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


SCORES = st.sampled_from([0.0, -0.0, 0.25, 0.5, 0.75, 1.0])
EXAMPLES = ["e0", "e1", "e2", "e3"]
STATUSES = ["seed", "confirmed", "speculative", "removed"]


def scores_for(draw_scores: list[float | None], examples: Sequence[str]) -> dict[str, float]:
    # None leaves the example unscored (a speculative artifact's prefix): it counts as 0.
    return {ex: s for ex, s in zip(examples, draw_scores) if s is not None}


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "status", "rescore", "check"]),
        st.integers(0, 10_000),
        st.sampled_from(STATUSES),
        st.lists(st.one_of(st.none(), SCORES), min_size=4, max_size=4),
    ),
    min_size=1,
    max_size=40,
)


def check(pool: Pool, examples: Sequence[str]) -> None:
    for confirmed, arts in ((False, pool.live()), (True, pool.confirmed())):
        assert front_weights(pool, examples, confirmed=confirmed) == reference_weights(arts, examples)
        assert pareto_weights(arts, examples) == reference_weights(arts, examples)
    assert pool.best() is top_of(pool.confirmed())
    assert pool.leader() is top_of(pool.live())


def run_ops(pool: Pool, ops: list, examples: Sequence[str], check_every: bool, prefix: str = "a") -> None:
    ids: list[str] = []
    for kind, pick, status, raw in ops:
        if kind == "add" or not ids:
            aid = f"{prefix}{len(ids)}"
            pool.add(Artifact(aid, aid, (), 0, scores_for(raw, examples), status=status))
            ids.append(aid)
        elif kind == "status":
            pool.set_status(ids[pick % len(ids)], status)
        elif kind == "rescore":
            pool.set_status(ids[pick % len(ids)], status, val_scores=scores_for(raw, examples))
        if check_every or kind == "check":
            check(pool, examples)
    check(pool, examples)


@settings(max_examples=300, deadline=None, database=None)
@given(OPS, st.booleans())
def test_incremental_fronts_equal_from_scratch(ops: list, warm: bool) -> None:
    pool = Pool()
    if warm:  # indexes built up front and updated from the first change on
        check(pool, EXAMPLES)
    run_ops(pool, ops, EXAMPLES, check_every=True)


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, OPS)
def test_index_built_late_equals_from_scratch(ops: list, more: list) -> None:
    # Built from the artifacts on first use (the final check), mid-run, then kept current.
    pool = Pool()
    run_ops(pool, ops, EXAMPLES, check_every=False)
    run_ops(pool, more, EXAMPLES, check_every=True, prefix="b")


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, st.lists(st.sampled_from(EXAMPLES + ["unscored"]), max_size=6))
def test_any_example_list_repeats_and_unknown_ids_included(ops: list, examples: list[str]) -> None:
    pool = Pool()
    run_ops(pool, ops, EXAMPLES, check_every=False)
    check(pool, examples)


@settings(max_examples=100, deadline=None, database=None)
@given(OPS, OPS)
def test_restore_rebuilds_indexes(before: list, after: list) -> None:
    pool = Pool()
    run_ops(pool, before, EXAMPLES, check_every=False)
    # Restore onto a pool whose indexes hold other artifacts, then keep changing it.
    other = Pool()
    run_ops(other, after, EXAMPLES, check_every=False)
    changes = [PoolChange(v, "add", "x", {}) for v in range(1, other.version + 1)]
    pool.restore(other.artifacts(), changes)
    check(pool, EXAMPLES)
    pool.add(Artifact("late", "late", (), 0, {"e0": 1.0, "e1": 1.0}, status="confirmed"))
    check(pool, EXAMPLES)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(SCORES, min_size=4, max_size=4)), max_size=8),
       st.lists(st.sampled_from(EXAMPLES), max_size=5))
def test_list_weights_with_version_ties_keep_input_order(rows: list, examples: list[str]) -> None:
    # Equal (mean, created_version) keys: the stable sort's input order decides, as before.
    arts = [Artifact(f"a{i}", "", (), version, dict(zip(EXAMPLES, scores))) for i, (version, scores) in enumerate(rows)]
    assert pareto_weights(arts, examples) == reference_weights(arts, examples)
    for order in (arts, arts[::-1]):
        assert ParetoFronts(examples, lambda a: True, order).weights() == reference_weights(order, examples)


def test_long_random_run_matches_and_sampling_is_identical() -> None:
    rng = random.Random(17)
    pool = Pool()
    examples = [f"e{i}" for i in range(12)]
    pool.add(Artifact("seed", "", (), 0, {e: 0.5 for e in examples}, status="seed"))
    ids = ["seed"]
    for n in range(400):
        roll = rng.random()
        if roll < 0.6:
            aid = f"a{n}"
            prefix = examples[: rng.randint(1, len(examples))]
            pool.add(Artifact(aid, "", (rng.choice(ids),), 0, {e: rng.choice([0.0, 0.5, 1.0]) for e in prefix},
                              status=rng.choice(["speculative", "confirmed"])))
            ids.append(aid)
        elif roll < 0.8:
            pool.set_status(rng.choice(ids), rng.choice(["confirmed", "removed"]),
                            val_scores={e: rng.choice([0.0, 0.5, 1.0]) for e in examples})
        if n % 20 == 0 or n > 380:
            check(pool, examples)
