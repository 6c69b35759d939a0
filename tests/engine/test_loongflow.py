"""The loongflow strategy: Boltzmann probabilities, both temperature rules, MAP-Elites cells,
placement by the pick's island tag, migration, eviction, the config, and the resume property:
the islands index kept live equals one rebuilt from the pool's artifacts."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import ConfigError, RunConfig, build_config
from engine.pool import Artifact, Pool, PoolChange
from engine.selection.islands import IslandArchive, IslandSettings, Membership
from engine.stages.kinds import search_params
from engine.strategy import build
from engine.strategy.boltzmann import (
    BoltzmannIslandSelector,
    IslandElites,
    archive_of,
    boltzmann_probabilities,
    island_tau,
    pairwise_diversity,
    paper_tau,
    released_code_tau,
)


def add(pool: Pool, aid: str, score: float, text: str = "abcabc", *, status: str = "confirmed",
        island: int | None = None, parents: tuple[str, ...] = ()) -> Artifact:
    meta = {"selection": {"island": island}} if island is not None else {}
    if not parents and status != "seed" and "seed" in pool:
        parents = ("seed",)
    pool.add(Artifact(aid, text, parents, 0, {"score": score}, status=status, meta=meta))
    return pool.get(aid)


def seeded(settings_: IslandSettings, seed_score: float = 0.1, text: str = "abcabc") -> tuple[Pool, IslandArchive]:
    pool = Pool()
    islands = archive_of(pool, settings_)
    add(pool, "seed", seed_score, text, status="seed")
    return pool, islands


# -- Boltzmann probabilities and temperatures ---------------------------------------------------
def test_boltzmann_probabilities_for_known_scores_and_tau() -> None:
    probs = boltzmann_probabilities([0.0, 5.0, 10.0], tau=1.0)  # normalised to 0, 0.5, 1
    weights = [math.exp(-1.0), math.exp(-0.5), 1.0]
    assert probs == pytest.approx([w / sum(weights) for w in weights])
    cold = boltzmann_probabilities([0.0, 5.0, 10.0], tau=0.01)
    assert cold[2] == pytest.approx(1.0) and cold[0] < 1e-30
    hot = boltzmann_probabilities([0.0, 5.0, 10.0], tau=100.0)
    assert max(hot) - min(hot) < 0.01
    assert boltzmann_probabilities([3.0, 3.0], tau=0.5) == [0.5, 0.5]
    assert boltzmann_probabilities([], tau=1.0) == []


def test_temperature_formulas() -> None:
    assert paper_tau(1.0, 0.0) == pytest.approx(2.0)  # a converged island explores
    assert paper_tau(0.5, math.log(4)) == pytest.approx(0.5 * 1.25)  # a spread one exploits
    assert released_code_tau(1.0, 0.0) == pytest.approx(0.8 * 0.5 + 0.2)  # clipped at 0.5
    assert released_code_tau(1.0, 1.0) == pytest.approx(0.8 * 2.0 + 0.2)
    assert released_code_tau(1.0, 0.3) == pytest.approx(0.8 * 0.6 + 0.2)


def four_corners() -> IslandArchive:
    # Length 6 or 12 x novelty 0 or 1 against the seed ("abc" vs "xyz" trigrams): 2x2 bins, one
    # member per cell.
    pool, islands = seeded(IslandSettings(islands=1, bins=2, migration_interval=100), text="abcabc")
    add(pool, "c1", 0.2, "xyzxyz")
    add(pool, "c2", 0.3, "abcabcabcabc")
    add(pool, "c3", 0.4, "xyzxyzxyzxyz")
    return islands


def test_both_temperature_rules_on_known_islands() -> None:
    islands = four_corners()
    assert set(islands.grid(0).cell_of.values()) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert islands.entropy(0) == pytest.approx(math.log(4))
    assert island_tau(islands, 0, "paper", 1.0) == pytest.approx(1.25)
    # Pairs: length differences 0 or 1/2, one line each, character sets equal or disjoint: D = 1/3.
    traits = [islands.traits(a) for a in ("seed", "c1", "c2", "c3")]
    assert pairwise_diversity(traits) == pytest.approx(1 / 3)
    assert island_tau(islands, 0, "released_code", 1.0) == pytest.approx(0.8 * (2 / 3) + 0.2)

    pool, one_cell = seeded(IslandSettings(islands=1, bins=1))
    add(pool, "c1", 0.5, "xyzxyz")
    assert one_cell.entropy(0) == 0.0
    assert island_tau(one_cell, 0, "paper", 1.0) == pytest.approx(2.0)
    # One elite: no pairs, D = 0, clipped to 0.5.
    assert island_tau(one_cell, 0, "released_code", 1.0) == pytest.approx(0.6)


# -- cells, placement, migration, eviction --------------------------------------------------------
def test_a_cell_keeps_its_best() -> None:
    pool, islands = seeded(IslandSettings(islands=1, bins=1, migration_interval=100))
    assert [a.artifact_id for a in islands.elites(0)] == ["seed"]
    add(pool, "better", 0.7)
    assert [a.artifact_id for a in islands.elites(0)] == ["better"]
    add(pool, "worse", 0.6)
    add(pool, "tie", 0.7)  # a tie keeps the older
    assert [a.artifact_id for a in islands.elites(0)] == ["better"]
    assert {a.artifact_id for a in islands.members(0)} == {"seed", "better", "worse", "tie"}


def test_children_join_the_island_they_were_picked_in_and_the_seed_is_everywhere() -> None:
    pool, islands = seeded(IslandSettings(islands=3, migration_interval=100))
    assert [islands.own(i) for i in range(3)] == [0, 0, 0]
    assert islands.islands_of("seed") == [0, 1, 2]
    add(pool, "a", 0.3, island=2)
    add(pool, "b", 0.3)  # untagged: the emptiest (lowest index on a tie)
    add(pool, "c", 0.3, island=7)  # out of range (e.g. fewer islands after a config change)
    assert islands.islands_of("a") == [2] and islands.islands_of("b") == [0] and islands.islands_of("c") == [1]


def test_migration_reaches_both_neighbours_without_duplicates() -> None:
    pool, islands = seeded(IslandSettings(islands=3, migration_interval=4, migration_share=1.0, bins=1, migration_trigger="interval"))
    add(pool, "x0", 0.5, island=0)
    add(pool, "x1", 0.6, island=1)
    add(pool, "x2", 0.7, island=2)  # the fourth live artifact: every island sends its elite
    for i, own in enumerate(("x0", "x1", "x2")):
        ring = {f"x{(i - 1) % 3}", f"x{(i + 1) % 3}"}
        members = islands.islands[i].members
        assert set(members) == {"seed", own} | ring
        assert members[own] == Membership(home=True)
        assert all(members[m] == Membership(home=False, migrated_from=int(m[1])) for m in ring)
    assert islands.islands[0].members["seed"] == Membership(home=False)  # not re-added
    assert all(islands.islands_of(f"x{i}")[0] == i for i in range(3))  # home first


def test_two_islands_receive_a_migrant_once() -> None:
    pool, islands = seeded(IslandSettings(islands=2, migration_interval=3, migration_share=1.0, bins=1, migration_trigger="interval"))
    add(pool, "x0", 0.5, island=0)
    add(pool, "x1", 0.6, island=1)
    assert set(islands.islands[0].members) == {"seed", "x0", "x1"}
    assert set(islands.islands[1].members) == {"seed", "x0", "x1"}


def test_eviction_keeps_the_cap_and_never_drops_the_global_best() -> None:
    pool, islands = seeded(IslandSettings(islands=2, population_cap=2, migration_interval=3, bins=1))
    rng = random.Random(3)
    add(pool, "best", 0.99, island=1)
    for n in range(40):
        add(pool, f"c{n}", rng.random() * 0.9, text="abc" * rng.randint(1, 20), island=rng.randint(0, 1))
        assert all(len(isl.members) <= 2 for isl in islands.islands)
        assert islands.best_id == "best" and islands.islands_of("best")
    assert sum(isl.evicted for isl in islands.islands) > 0


def test_cap_one_keeps_only_the_global_best() -> None:
    pool, islands = seeded(IslandSettings(islands=1, population_cap=1, bins=1))
    add(pool, "top", 0.9)
    add(pool, "low", 0.2)
    assert list(islands.islands[0].members) == ["top"]


# -- the resume property ----------------------------------------------------------------------------
TEXTS = ["abcabc", "xyzxyz", "abcabcabcabc", "def = 1\nreturn x", "abc\nxyz\nabc", "q" * 40]
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "confirm", "remove", "read"]), st.integers(0, 1000),
              st.floats(0, 1, allow_nan=False), st.sampled_from(TEXTS), st.one_of(st.none(), st.integers(-1, 4)),
              st.booleans()),
    min_size=1, max_size=40,
)
SETTINGS = st.builds(IslandSettings, islands=st.integers(1, 4), migration_interval=st.integers(1, 5),
                     migration_share=st.sampled_from([0.1, 0.5, 1.0]), bins=st.one_of(st.none(), st.integers(1, 3)),
                     population_cap=st.integers(1, 6))


def run_ops(pool: Pool, islands: IslandArchive, ops: list) -> None:
    ids: list[str] = []
    for kind, pick, score, text, island, speculative in ops:
        spec = [a for a in ids if pool.get(a).status == "speculative"]
        if kind == "add" or not ids:
            parent = ids[pick % len(ids)] if ids else "seed"
            aid = f"a{len(ids)}"
            add(pool, aid, score, text, status="speculative" if speculative else "confirmed", island=island,
                parents=(parent,))
            ids.append(aid)
        elif kind in ("confirm", "remove") and spec:
            aid = spec[pick % len(spec)]
            pool.set_status(aid, "confirmed" if kind == "confirm" else "removed",
                            val_scores={"score": score} if kind == "confirm" else None)
        elif kind == "read":
            islands.elites(pick % len(islands))  # reads between changes must not change the fold


@settings(max_examples=150, deadline=None, database=None)
@given(SETTINGS, OPS, st.randoms(use_true_random=False))
def test_live_islands_equal_islands_rebuilt_from_the_pool(cfg: IslandSettings, ops: list, rnd: random.Random) -> None:
    pool, live = seeded(cfg)
    run_ops(pool, live, ops)
    arts = pool.artifacts()
    rnd.shuffle(arts)  # the store hands them back in any order
    assert IslandArchive(cfg, arts).state() == live.state()
    # A resumed run: a new pool restored from the same artifacts rebuilds the same islands.
    resumed = Pool()
    before = archive_of(resumed, cfg)
    resumed.restore(arts, [PoolChange(v, "add", "x", {}) for v in range(1, pool.version + 1)])
    after = archive_of(resumed, cfg)
    assert after is not before and after.state() == live.state()


def test_a_long_run_with_speculation_replays_from_checkpoints_and_matches_a_rebuild() -> None:
    cfg = IslandSettings(islands=3, population_cap=8, migration_interval=7)
    pool, live = seeded(cfg)
    selector = BoltzmannIslandSelector(cfg)
    rng = random.Random(11)
    for n in range(300):  # many checkpoints; half the children speculative, resolved a few commits later
        pick = selector.pick(pool, [], rng)
        add(pool, f"a{n}", rng.random(), TEXTS[n % len(TEXTS)] + str(n), island=int(pick.tags["island"]),
            status="speculative" if n % 2 else "confirmed", parents=(pick.parent_id,))
        if n % 2 and n > 4:
            late = f"a{n - 4}"
            pool.set_status(late, "removed" if n % 3 == 0 else "confirmed",
                            val_scores=None if n % 3 == 0 else {"score": rng.random()})
    assert IslandArchive(cfg, pool.artifacts()).state() == live.state()


# -- the selector and context -----------------------------------------------------------------------
def test_empty_islands_are_picked_first_and_the_pick_carries_its_island() -> None:
    cfg = IslandSettings(islands=3, migration_interval=100)
    pool, islands = seeded(cfg)
    selector = BoltzmannIslandSelector(cfg)
    rng = random.Random(0)
    picks = [selector.pick(pool, [], rng) for _ in range(3)]
    assert [p.tags["island"] for p in picks] == [0, 1, 2] and all(p.parent_id == "seed" for p in picks)
    add(pool, "a", 0.5, island=0)
    add(pool, "b", 0.5, island=1)
    assert {selector.pick(pool, [], rng).tags["island"] for _ in range(4)} == {2}
    add(pool, "c", 0.5, island=2)
    assert [selector.pick(pool, [], rng).tags["island"] for _ in range(3)] == [1, 2, 0]  # round robin


def test_boltzmann_pick_follows_the_probabilities() -> None:
    cfg = IslandSettings(islands=1, bins=2, migration_interval=100)
    pool, islands = seeded(cfg)
    add(pool, "hi", 1.0, "xyzxyz")
    selector = BoltzmannIslandSelector(cfg, tau_base=0.25, explore_prob=0.0, visit_counts=False)
    tau = island_tau(islands, 0, "paper", 0.25)
    expected = dict(zip(["hi", "seed"], boltzmann_probabilities([1.0, 0.1], tau)))
    rng = random.Random(5)
    n = 4000
    counts = {"hi": 0, "seed": 0}
    for _ in range(n):
        counts[selector.pick(pool, [], rng).parent_id] += 1
    assert counts["hi"] / n == pytest.approx(expected["hi"], abs=0.03)


def test_stagnation_raises_the_exploration_chance() -> None:
    cfg = IslandSettings(islands=1, migration_interval=100)
    pool, islands = seeded(cfg, seed_score=0.9)
    selector = BoltzmannIslandSelector(cfg, explore_prob=0.2, stagnation_k=3)
    add(pool, "a", 0.1)
    assert selector.explore_chance(islands, 0) == 0.2
    add(pool, "b", 0.1)
    add(pool, "c", 0.1)
    assert islands.stagnant_for(0) == 3 and selector.explore_chance(islands, 0) == pytest.approx(0.4)
    add(pool, "d", 0.95)
    assert selector.explore_chance(islands, 0) == 0.2


def test_inspirations_are_the_parents_islands_top_elites() -> None:
    cfg = IslandSettings(islands=2, migration_interval=100, bins=2)
    pool, _ = seeded(cfg)
    add(pool, "a", 0.5, "xyzxyz", island=0)
    add(pool, "b", 0.9, "abcabcabcabc", island=0)
    add(pool, "other", 0.99, "xyzxyzxyzxyz", island=1)
    got = IslandElites(cfg, count=2).inspirations(pool, pool.get("a"), random.Random(0))
    assert [a.artifact_id for a in got] == ["b", "seed"]


# -- configuration --------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value, words", [
    ("islands", 0, "greater than or equal to 1"),
    ("bins", 0, "greater than or equal to 1"),
    ("migration_share", 0, "greater than 0"),
    ("migration_share", 1.5, "less than or equal to 1"),
    ("migration_interval", 0, "greater than or equal to 1"),
    ("temperature_rule", "warm", "'paper' or 'released_code'"),
])
def test_bad_loongflow_values_name_the_key(key: str, value: object, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config([("cfg.toml", {"strategy": {"name": "loongflow", "loongflow": {key: value}}})])
    msg = str(info.value)
    assert msg.startswith(f"cfg.toml: 'strategy.loongflow.{key}': ") and words in msg


def test_unknown_loongflow_key_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'strategy.loongflow.island'"):
        build_config([("cfg.toml", {"strategy": {"loongflow": {"island": 2}}})])


def test_the_config_reaches_the_strategy() -> None:
    config = RunConfig.model_validate({"strategy": {"name": "loongflow", "loongflow": {
        "islands": 5, "bins": 4, "temperature_rule": "released_code", "tau_base": 0.5, "inspirations": 1}}})
    strategy = build("loongflow", "prompt", search_params(SimpleNamespace(kind="prompt"), config))
    assert strategy.name == "loongflow" and not strategy.merges and not strategy.acceptance.gated
    selector = strategy.selector
    assert isinstance(selector, BoltzmannIslandSelector)
    assert selector.settings == IslandSettings(islands=5, migration_interval=10, migration_share=0.2, bins=4,
                                               population_cap=30)
    assert (selector.temperature_rule, selector.tau_base) == ("released_code", 0.5)
    assert strategy.context == IslandElites(selector.settings, 1)
    # Built without a config (e.g. a bare SearchParams): the defaults.
    from engine.strategy import SearchParams
    plain = build("loongflow", "program", SearchParams()).selector
    assert isinstance(plain, BoltzmannIslandSelector) and plain.settings == IslandSettings()
