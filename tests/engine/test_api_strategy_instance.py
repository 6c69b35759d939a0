"""evotui.optimize(strategy=...) takes a Strategy instance the caller composed, not only a name."""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass, field

import pytest

import evotui
from engine.strategy import SearchParams, UnknownStrategy, build
from engine.strategy.parts import ParentGate, ParentOnly, ParetoSelector
from engine.strategy.protocols import Pick, Strategy
from tests.engine.test_api import SEED, KeywordAdapter, _data


@dataclass
class CountingSelector:
    """GEPA's Pareto pick, counted: proof that the run used this very object."""

    picks: list = field(default_factory=list)
    name: str = "Pareto front, counted"

    def pick(self, archive, instances, rng: random.Random) -> Pick:
        chosen = ParetoSelector().pick(archive, instances, rng)
        self.picks.append(chosen.parent_id)
        return chosen

    def merge_weights(self, archive, instances):
        return ParetoSelector().merge_weights(archive, instances)


def test_a_strategy_instance_runs_through_optimize(tmp_path):
    selector = CountingSelector()
    mine = Strategy(name="counted-gepa", summary="gepa with a counted selector", selector=selector,
                    context=ParentOnly(), acceptance=ParentGate(), merges=False)
    db = tmp_path / "a.db"
    res = evotui.optimize(SEED, _data(6, 0), _data(4, 10), KeywordAdapter(), strategy=mine, mode="async",
                          max_proposals=5, db=db)
    assert res.status == "completed"
    assert len(selector.picks) >= 5 and set(selector.picks) <= set(res.artifact_ids)
    stored = json.loads(sqlite3.connect(db).execute("SELECT config_json FROM runs").fetchone()[0])
    assert stored["strategy"]["name"] == "counted-gepa"
    # The instance was the run's own: the process registry never learnt its name.
    with pytest.raises(UnknownStrategy, match="unknown strategy 'counted-gepa'"):
        build("counted-gepa", "adapter", SearchParams())


def test_a_strategy_that_is_neither_name_nor_instance_is_refused(tmp_path):
    with pytest.raises(ValueError, match="strategy must be a strategy name .* not a dict"):
        evotui.optimize(SEED, _data(6, 0), _data(4, 10), KeywordAdapter(), strategy={"name": "gepa"},
                        max_proposals=2, db=tmp_path / "b.db")
    assert not (tmp_path / "b.db").exists()
