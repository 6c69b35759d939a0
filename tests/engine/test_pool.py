"""The versioned artifact pool: adds, changelog, restore and best()."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pool import Artifact, Pool, PoolChange, PoolError

EXAMPLES = ("e1", "e2")


def art(aid: str, parents: tuple[str, ...] = (), scores: dict | None = None, created_version: int = 0, **kw) -> Artifact:
    return Artifact(
        artifact_id=aid,
        text=f"text of {aid}",
        parent_ids=tuple(parents),
        created_version=created_version,
        val_scores=dict(scores or {}),
        **kw,
    )


def expected_best(order: list[Artifact]) -> Artifact | None:
    """Reference: walk in commit order, a later artifact leads only if strictly better."""
    best = None
    for a in order:
        if best is None or a.val_mean > best.val_mean:
            best = a
    return best


# -- unit tests ---------------------------------------------------------------------------------------


def test_empty_pool() -> None:
    pool = Pool()
    assert pool.version == 0
    assert len(pool) == 0
    assert pool.best() is None
    assert pool.changes_since(0) == []
    assert pool.artifacts() == []
    with pytest.raises(PoolError, match="not in the pool"):
        pool.get("nope")


def test_add_assigns_version_and_freezes_the_stored_copy() -> None:
    pool = Pool()
    scores = {"e1": 0.5}
    meta = {"origin": "seed"}
    change = pool.add(art("seed", scores=scores, created_version=42, meta=meta), detail={"why": "seed"})
    assert change == PoolChange(1, "add", "seed", {"why": "seed"})
    assert pool.version == 1
    stored = pool.get("seed")
    # The pool, not the caller, decides created_version.
    assert stored.created_version == 1
    # Later mutation of the caller's dicts does not leak into the pool.
    scores["e1"] = 0.0
    meta["origin"] = "changed"
    assert stored.val_scores == {"e1": 0.5}
    assert stored.meta == {"origin": "seed"}
    with pytest.raises(TypeError):
        stored.val_scores["e1"] = 1.0  # type: ignore[index]
    with pytest.raises(TypeError):
        change.detail["why"] = "x"  # type: ignore[index]
    assert "seed" in pool and "other" not in pool


def test_duplicate_and_orphan_adds_are_refused_without_side_effects() -> None:
    pool = Pool()
    pool.add(art("a"))
    with pytest.raises(PoolError, match="already in the pool"):
        pool.add(art("a"))
    with pytest.raises(PoolError, match="parent 'ghost'"):
        pool.add(art("b", parents=("a", "ghost")))
    assert pool.version == 1
    assert len(pool) == 1
    assert "b" not in pool
    assert [c.version for c in pool.changes_since(0)] == [1]


def test_gap_is_distance_to_current_version() -> None:
    pool = Pool()
    for i in range(4):
        pool.add(art(f"a{i}"))
    assert pool.gap(1) == 3
    assert pool.gap(4) == 0


def test_changes_since() -> None:
    pool = Pool()
    for i in range(5):
        pool.add(art(f"a{i}"))
    assert [c.version for c in pool.changes_since(2)] == [3, 4, 5]
    assert [c.artifact_id for c in pool.changes_since(2)] == ["a2", "a3", "a4"]
    assert pool.changes_since(5) == []
    assert pool.changes_since(99) == []
    assert [c.version for c in pool.changes_since(-1)] == [1, 2, 3, 4, 5]


def test_best_prefers_higher_mean_and_older_on_ties() -> None:
    pool = Pool()
    pool.add(art("old", scores={"e1": 1.0, "e2": 0.0}))
    pool.add(art("tie", scores={"e1": 0.0, "e2": 1.0}))
    assert pool.best().artifact_id == "old"
    pool.add(art("better", scores={"e1": 1.0, "e2": 0.5}))
    assert pool.best().artifact_id == "better"
    pool.add(art("tie2", scores={"e1": 0.5, "e2": 1.0}))
    assert pool.best().artifact_id == "better"


def test_leader_includes_speculative_artifacts_and_skips_removed_ones() -> None:
    pool = Pool()
    assert pool.leader() is None
    pool.add(art("seed", scores={"e1": 0.5, "e2": 0.5}))
    pool.add(art("spec", ("seed",), scores={"e1": 1.0}, status="speculative"))
    assert pool.best().artifact_id == "seed" and pool.leader().artifact_id == "spec"
    pool.set_status("spec", "removed")
    assert pool.leader().artifact_id == "seed"
    pool.add(art("tie", ("seed",), scores={"e1": 0.0, "e2": 1.0}))
    assert pool.leader().artifact_id == "seed"  # ties go to the older artifact, as in best()


class Recorder:
    """A derived structure that records what the pool tells it."""

    def __init__(self, artifacts) -> None:
        self.seen = [(a.artifact_id, a.status) for a in artifacts]

    def apply(self, artifact: Artifact) -> None:
        self.seen.append((artifact.artifact_id, artifact.status))


def test_index_is_built_once_then_told_every_change_and_rebuilt_on_restore() -> None:
    pool = Pool()
    pool.add(art("a", scores={"e1": 0.5}))
    rec = pool.index("rec", Recorder)
    assert rec.seen == [("a", "confirmed")]
    assert pool.index("rec", lambda arts: pytest.fail("built twice")) is rec
    pool.add(art("b", ("a",), status="speculative"))
    pool.set_status("b", "removed")
    assert rec.seen == [("a", "confirmed"), ("b", "speculative"), ("b", "removed")]
    pool.restore([pool.get("a")], [PoolChange(1, "add", "a", {})])
    fresh = pool.index("rec", Recorder)
    assert fresh is not rec and fresh.seen == [("a", "confirmed")]
    assert pool.best().artifact_id == "a" and pool.leader().artifact_id == "a"


def test_best_follows_rescoring_and_removal() -> None:
    pool = Pool()
    pool.add(art("seed", scores={"e1": 0.5}, status="seed"))
    pool.add(art("x", ("seed",), scores={"e1": 0.9}, status="speculative"))
    assert pool.best().artifact_id == "seed" and pool.leader().artifact_id == "x"
    pool.set_status("x", "confirmed", val_scores={"e1": 0.4, "e2": 0.4})
    assert pool.best().artifact_id == "seed" and pool.leader().artifact_id == "seed"
    pool.set_status("x", "confirmed", val_scores={"e1": 1.0})
    assert pool.best().artifact_id == "x"
    pool.set_status("x", "removed")
    assert pool.best().artifact_id == "seed" and pool.leader().artifact_id == "seed"


def test_val_mean_of_empty_scores_is_zero() -> None:
    assert art("x").val_mean == 0.0
    assert art("x", scores={"a": 1.0, "b": 0.0}).val_mean == 0.5


def test_restore_round_trip_and_hole() -> None:
    pool = Pool()
    pool.add(art("a", scores={"e1": 0.2}))
    pool.add(art("b", parents=("a",), scores={"e1": 0.9}))
    pool.add(art("c", parents=("b",), scores={"e1": 0.9}))
    changes = pool.changes_since(0)

    fresh = Pool()
    fresh.restore(pool.artifacts(), list(reversed(changes)))  # persisted order does not matter
    assert fresh.version == 3
    assert fresh.best().artifact_id == "b"
    assert fresh.changes_since(1) == changes[1:]
    # The restored pool keeps counting from where it was.
    assert fresh.add(art("d", parents=("c",))).version == 4

    holed = Pool()
    with pytest.raises(PoolError, match="hole at version 2"):
        holed.restore(pool.artifacts(), [changes[0], changes[2]])
    with pytest.raises(PoolError, match="hole at version 1"):
        Pool().restore([], [changes[1]])

    empty = Pool()
    empty.restore([], [])
    assert empty.version == 0 and empty.best() is None


# -- property test ------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, database=None)
@given(st.data())
def test_pool_invariants_under_random_adds(data: st.DataObject) -> None:
    pool = Pool()
    committed: list[Artifact] = []
    n_ops = data.draw(st.integers(min_value=0, max_value=25), label="n_ops")
    for step in range(n_ops):
        ids = [a.artifact_id for a in committed]
        op = data.draw(st.sampled_from(["add", "add", "add", "duplicate", "orphan"]), label="op")
        before = (pool.version, len(pool))
        if op == "duplicate" and ids:
            dup = data.draw(st.sampled_from(ids), label="dup")
            with pytest.raises(PoolError):
                pool.add(art(dup))
            assert (pool.version, len(pool)) == before
            continue
        parents = tuple(data.draw(st.lists(st.sampled_from(ids), max_size=3, unique=True), label="parents")) if ids else ()
        scores = {ex: data.draw(st.sampled_from([0.0, 0.5, 1.0]), label="score") for ex in EXAMPLES}
        if op == "orphan":
            with pytest.raises(PoolError):
                pool.add(art(f"x{step}", parents=(*parents, f"missing{step}"), scores=scores))
            assert (pool.version, len(pool)) == before
            assert f"x{step}" not in pool
            continue
        bogus_version = data.draw(st.integers(min_value=-5, max_value=100), label="bogus_version")
        change = pool.add(art(f"x{step}", parents=parents, scores=scores, created_version=bogus_version))
        assert change.version == pool.version == before[0] + 1
        committed.append(pool.get(f"x{step}"))

    # version == number of successful adds; changelog contiguous 1..v
    v = pool.version
    assert v == len(committed) == len(pool)
    log = pool.changes_since(0)
    assert [c.version for c in log] == list(range(1, v + 1))
    # changes_since(k) is exactly the versions > k, in order
    for k in range(-1, v + 2):
        assert [c.version for c in pool.changes_since(k)] == [c.version for c in log if c.version > k]
    # created_version unique and equal to the version of its add change; parents were present
    by_id = {c.artifact_id: c for c in log}
    versions = [a.created_version for a in pool.artifacts()]
    assert len(set(versions)) == len(versions)
    for a in pool.artifacts():
        assert a.created_version == by_id[a.artifact_id].version
        for p in a.parent_ids:
            assert p in pool
            assert pool.get(p).created_version < a.created_version
    # best(): highest mean, ties to the older artifact
    best = pool.best()
    ref = expected_best(committed)
    assert (best.artifact_id if best else None) == (ref.artifact_id if ref else None)

    # restore from (artifacts, changelog) in any order reproduces version and best
    shuffled = list(log)
    random.Random(v).shuffle(shuffled)
    restored = Pool()
    restored.restore(pool.artifacts(), shuffled)
    assert restored.version == v
    assert restored.changes_since(0) == log
    assert (restored.best().artifact_id if restored.best() else None) == (best.artifact_id if best else None)

    # a hole anywhere but the end is detected
    if v >= 2:
        hole = data.draw(st.integers(min_value=0, max_value=v - 2), label="hole")
        with pytest.raises(PoolError, match=f"hole at version {hole + 1}"):
            Pool().restore(pool.artifacts(), log[:hole] + log[hole + 1 :])


# -- restores ---------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("add"), st.integers(0, 10)), st.tuples(st.just("restore"), st.integers(0, 50))),
                min_size=1, max_size=30))
def test_best_follows_restores_and_a_rebuilt_pool_agrees(ops) -> None:
    """Reference: after a restore the best is the restored artifact until a strictly better one
    is committed; a pool rebuilt from its artifacts and changelog (a resume) answers the same."""
    pool, expected, n = Pool(), None, 0
    pool.add(art("s", scores={"e1": 0.0}, status="seed"))
    expected = pool.get("s")
    for op, x in ops:
        if op == "add":
            n += 1
            pool.add(art(f"a{n}", ("s",), {"e1": x / 10}))
            new = pool.get(f"a{n}")
            if new.val_mean > expected.val_mean:
                expected = new
        else:
            target = pool.artifacts()[x % len(pool)]
            pool.set_status(target.artifact_id, target.status, None, {"restore": True})
            expected = pool.get(target.artifact_id)
        assert pool.best() is not None and pool.best().artifact_id == expected.artifact_id
    rebuilt = Pool()
    rebuilt.restore(pool.artifacts(), pool.changes_since(0))
    assert rebuilt.best().artifact_id == expected.artifact_id
    assert (rebuilt.restored is None) == (pool.restored is None)
