"""GEPA selection: Pareto weights, parent sampling and the minibatch sampler."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pool import Artifact
from engine.selection.pareto import (
    MinibatchSampler,
    example_fronts,
    pareto_weights,
    restore_rng,
    rng_state,
    sample_parent,
)


def cand(aid: str, version: int, **scores: float) -> Artifact:
    return Artifact(artifact_id=aid, text=aid, parent_ids=(), created_version=version, val_scores=scores)


# -- pareto_weights ----------------------------------------------------------------------------------


def test_empty_pool_has_no_weights() -> None:
    assert pareto_weights([], ["e1"]) == {}


def test_example_fronts_hold_every_best_scorer() -> None:
    arts = [cand("a", 1, e1=1.0, e2=0.0), cand("b", 2, e1=1.0, e2=0.5), cand("c", 3, e1=0.0)]
    assert example_fronts(arts, ["e1", "e2"]) == [{"a", "b"}, {"b"}]


def test_candidates_on_no_front_are_dropped_and_specialists_kept() -> None:
    arts = [
        cand("a", 1, e1=1.0, e2=0.0),
        cand("b", 2, e1=0.0, e2=1.0),
        cand("middling", 3, e1=0.6, e2=0.6),  # best mean, but on no front
    ]
    assert pareto_weights(arts, ["e1", "e2"]) == {"a": 1, "b": 1}


def test_dominated_candidate_is_removed() -> None:
    arts = [cand("a", 1, e1=1.0, e2=1.0, e3=0.0), cand("b", 2, e1=1.0, e2=0.0, e3=0.0), cand("c", 3, e3=1.0)]
    # fronts: e1 {a, b}, e2 {a}, e3 {c}; b only sits on fronts a also holds.
    assert pareto_weights(arts, ["e1", "e2", "e3"]) == {"a": 2, "c": 1}


def test_weight_is_number_of_fronts() -> None:
    arts = [
        cand("a", 1, e1=1.0, e2=1.0, e3=0.0, e4=0.2),
        cand("b", 2, e1=0.0, e2=0.0, e3=1.0, e4=0.2),
    ]
    # e4 is a tie: both are on its front, so each gets credit for it.
    assert pareto_weights(arts, ["e1", "e2", "e3", "e4"]) == {"a": 3, "b": 2}


def test_identical_candidates_collapse_to_one() -> None:
    arts = [cand("a", 1, e1=0.5, e2=1.0), cand("b", 2, e1=0.5, e2=1.0)]
    weights = pareto_weights(arts, ["e1", "e2"])
    assert len(weights) == 1
    assert list(weights.values()) == [2]


def test_missing_scores_count_as_zero() -> None:
    arts = [cand("a", 1, e1=1.0), cand("b", 2, e2=0.3)]
    assert pareto_weights(arts, ["e1", "e2"]) == {"a": 1, "b": 1}


def test_no_examples_keeps_a_single_candidate_with_weight_one() -> None:
    weights = pareto_weights([cand("a", 1), cand("b", 2)], [])
    assert len(weights) == 1 and set(weights.values()) == {1}


SCORES = st.sampled_from([0.0, 0.25, 0.5, 1.0])


@settings(max_examples=120, deadline=None, database=None)
@given(st.lists(st.lists(SCORES, min_size=4, max_size=4), min_size=1, max_size=7))
def test_pareto_weights_properties(matrix: list[list[float]]) -> None:
    examples = [f"e{j}" for j in range(4)]
    arts = [cand(f"a{i}", i + 1, **dict(zip(examples, row))) for i, row in enumerate(matrix)]
    fronts = example_fronts(arts, examples)
    weights = pareto_weights(arts, examples)
    assert weights, "someone always survives"
    for aid, w in weights.items():
        # weight = number of example fronts the survivor sits on
        assert w == sum(aid in f for f in fronts) > 0
    for f in fronts:
        # removal never empties a front: every example keeps a best candidate
        assert f & set(weights)
        # the unique best on an example can never be dominated
        if len(f) == 1:
            assert next(iter(f)) in weights


# -- sample_parent ------------------------------------------------------------------------------------


def test_sample_parent_is_deterministic_for_a_seed_and_ignores_dict_order() -> None:
    w1 = {"a": 1, "b": 3, "c": 6}
    w2 = {"c": 6, "a": 1, "b": 3}
    r1, r2, r3 = random.Random(7), random.Random(7), random.Random(7)
    s1 = [sample_parent(w1, r1) for _ in range(200)]
    s2 = [sample_parent(w1, r2) for _ in range(200)]
    s3 = [sample_parent(w2, r3) for _ in range(200)]
    assert s1 == s2 == s3
    assert set(s1) == {"a", "b", "c"}


def test_sample_parent_distribution_follows_weights() -> None:
    weights = {"a": 1, "b": 3, "c": 6}
    rng = random.Random(20240101)
    n = 20_000
    counts = Counter(sample_parent(weights, rng) for _ in range(n))
    total = sum(weights.values())
    for aid, w in weights.items():
        # 4 standard deviations of a binomial proportion at n=20000 is < 0.015
        assert abs(counts[aid] / n - w / total) < 0.015, (aid, counts)


def test_sample_parent_single_candidate() -> None:
    assert sample_parent({"only": 4}, random.Random(0)) == "only"


# -- MinibatchSampler ---------------------------------------------------------------------------------


def test_empty_training_split_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        MinibatchSampler([], 3, random.Random(0))


@pytest.mark.parametrize("n, size", [(12, 3), (12, 4), (6, 6), (5, 1)])
def test_each_epoch_covers_every_id_once(n: int, size: int) -> None:
    ids = [f"t{i}" for i in range(n)]
    sampler = MinibatchSampler(ids, size, random.Random(3))
    per_epoch = n // size
    epochs = []
    for _ in range(4):
        epoch = [ex for _ in range(per_epoch) for ex in sampler.next()]
        assert sorted(epoch) == sorted(ids)
        epochs.append(epoch)
    if n > 2:
        assert len({tuple(e) for e in epochs}) > 1, "epochs are reshuffled"


def test_size_larger_than_split_is_clipped() -> None:
    sampler = MinibatchSampler(["a", "b"], 5, random.Random(0))
    assert sampler.size == 2
    for _ in range(5):
        assert sorted(sampler.next()) == ["a", "b"]


@settings(max_examples=80, deadline=None, database=None)
@given(n=st.integers(1, 9), size=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_batches_never_repeat_an_id(n: int, size: int, seed: int) -> None:
    ids = [f"t{i}" for i in range(n)]
    sampler = MinibatchSampler(ids, size, random.Random(seed))
    for _ in range(7):
        batch = sampler.next()
        assert len(batch) == min(size, n)
        assert len(set(batch)) == len(batch)
        assert set(batch) <= set(ids)


@pytest.mark.parametrize("taken", [0, 1, 2, 3, 5])
def test_state_restore_continues_the_same_sequence(taken: int) -> None:
    ids = [f"t{i}" for i in range(7)]
    rng = random.Random(99)
    original = MinibatchSampler(ids, 3, rng)
    for _ in range(taken):
        original.next()
    # persist as JSON, like the run store does
    saved = json.loads(json.dumps({"sampler": original.state(), "rng": rng_state(rng)}))
    expected = [original.next() for _ in range(6)]

    fresh_rng = random.Random(12345)
    resumed = MinibatchSampler(ids, 3, fresh_rng)
    restore_rng(fresh_rng, saved["rng"])
    resumed.restore(saved["sampler"])
    assert [resumed.next() for _ in range(6)] == expected


def test_rng_state_round_trip_through_json() -> None:
    rng = random.Random(5)
    rng.gauss(0, 1)  # populate gauss_next
    state = json.loads(json.dumps(rng_state(rng)))
    expected = [rng.random() for _ in range(5)] + [rng.gauss(0, 1)]
    other = random.Random()
    restore_rng(other, state)
    assert [other.random() for _ in range(5)] + [other.gauss(0, 1)] == expected


def test_restore_of_empty_state_starts_a_new_epoch() -> None:
    sampler = MinibatchSampler(["a", "b", "c"], 3, random.Random(1))
    sampler.next()
    sampler.restore({})
    assert sampler.order == [] and sampler.pos == 0
    assert sorted(sampler.next()) == ["a", "b", "c"]
