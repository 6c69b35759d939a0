"""The throughput default (engine/pipeline/modes.py) a new run of each built-in task kind gets."""

import pytest

from engine.config import build_config, new_run_layers
from engine.tasks.loader import load_any_task


@pytest.mark.parametrize("task", ["rules", "agent_tools", "circle_packing"])
def test_a_new_run_defaults_to_chain(task):
    # agent_tools has named components: chain since it was measured on it (6.87x sync, best
    # -0.010 +- 0.007, where async lost -0.230 +- 0.034)
    cfg = build_config(new_run_layers(load_any_task(task), []))
    assert cfg.pipeline.mode == "chain" and cfg.pipeline.chains == 8


@pytest.mark.parametrize("layer", [{"pipeline": {"mode": "async"}}, {"strategy": {"name": "loongflow"}}])
def test_a_chosen_mode_or_an_unmeasured_strategy_keeps_async(layer):
    cfg = build_config(new_run_layers(load_any_task("agent_tools"), [("test", layer)]))
    assert cfg.pipeline.mode == "async"
