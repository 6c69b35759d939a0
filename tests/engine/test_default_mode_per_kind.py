"""The throughput default (engine/pipeline/modes.py) a new run of each built-in task kind gets."""

import pytest

from engine.config import build_config, new_run_layers
from engine.tasks.loader import load_any_task


@pytest.mark.parametrize(("task", "chains"), [("rules", 8), ("agent_tools", 8), ("circle_packing", 12)])
def test_a_new_run_defaults_to_chain(task, chains):
    # agent_tools has named components: chain since it was measured on it (6.87x sync, best
    # -0.010 +- 0.007, where async lost -0.230 +- 0.034); program tasks run 12 chains (KIND_CHAINS)
    cfg = build_config(new_run_layers(load_any_task(task), []))
    assert cfg.pipeline.mode == "chain" and cfg.pipeline.chains == chains


@pytest.mark.parametrize(("task", "layer", "chains"), [
    ("circle_packing", {"pipeline": {"mode": "chain"}}, 12),  # mode chain chosen: still the kind's count
    ("circle_packing", {"pipeline": {"mode": "chain", "chains": 5}}, 5),  # a count set is kept
    ("circle_packing", {"pipeline": {"chains": 5}}, 5),
    ("rules", {"pipeline": {"mode": "chain"}}, 8),
])
def test_the_kinds_chain_count_yields_to_a_count_the_run_sets(task, layer, chains):
    cfg = build_config(new_run_layers(load_any_task(task), [("test", layer)]))
    assert cfg.pipeline.mode == "chain" and cfg.pipeline.chains == chains


def test_a_program_run_in_another_mode_gets_no_chain_layer():
    layers = new_run_layers(load_any_task("circle_packing"), [("test", {"pipeline": {"mode": "sync"}})])
    assert [name for name, _ in layers] == ["defaults of task.toml", "test"]


@pytest.mark.parametrize("layer", [{"pipeline": {"mode": "async"}}, {"strategy": {"name": "loongflow"}}])
def test_a_chosen_mode_or_an_unmeasured_strategy_keeps_async(layer):
    cfg = build_config(new_run_layers(load_any_task("agent_tools"), [("test", layer)]))
    assert cfg.pipeline.mode == "async"
