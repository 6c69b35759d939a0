"""What the strategy registry answers so that no module outside a strategy compares its name."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine.strategy import SearchParams, build, entries
from engine.strategy.parts import ParentGate, ParentOnly, ParetoSelector
from engine.strategy.protocols import Strategy
from engine.strategy.registry import island_options, instance_scope, option_models, register, runs_chain_default


def test_each_strategy_with_options_declares_its_model():
    models = option_models()
    assert set(models) == {"loongflow", "contextevolve"}
    assert all(m.model_config.get("extra") == "forbid" for m in models.values())
    assert {e.name for e in entries() if e.options is None} >= {"gepa", "openevolve", "sepl", "sepl-rr"}


def test_options_that_let_unknown_keys_in_are_refused_at_registration():
    class Loose(BaseModel):
        width: int = 2

    with pytest.raises(ValueError, match="must forbid unknown keys"):
        register("loose", "no", options=Loose)(lambda params: build("gepa", "prompt", params))


def test_strategies_declare_whether_they_run_islands():
    islands = {"islands": 5}
    assert island_options({"name": "loongflow", "loongflow": islands}) == islands
    assert island_options({"name": "contextevolve", "contextevolve": {"selection": "islands"},
                           "loongflow": islands}) == islands
    assert island_options({"name": "contextevolve", "contextevolve": {"selection": "pareto"}}) is None
    assert island_options({"name": "gepa"}) is None
    assert island_options({"name": "not-installed"}) is None


@pytest.mark.parametrize("kind", ["prompt", "program", "adapter"])
@pytest.mark.parametrize("name", [None, "gepa", "openevolve", "loongflow", "contextevolve", "sepl", "sepl-rr"])
def test_chain_default_answers_what_modes_py_compares_today(kind, name):
    # engine/pipeline/modes.py throughput_default's conditions, by name (to be replaced by this call).
    compared = name in ((None, "openevolve") if kind == "program" else (None, "gepa"))
    assert runs_chain_default(name, kind) is compared


def test_an_instance_scope_serves_the_name_only_inside_it():
    mine = Strategy(name="gepa", summary="my own gepa", selector=ParetoSelector(), context=ParentOnly(),
                    acceptance=ParentGate(), merges=False)
    with instance_scope(mine):
        assert build("gepa", "prompt", SearchParams()) is mine
        assert build(None, "prompt", SearchParams()) is mine  # the kind's default is that name too
    assert build("gepa", "prompt", SearchParams()) is not mine
