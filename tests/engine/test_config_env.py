"""The EVOTUI_<SECTION>__<KEY> environment layer: parsing, its place between --config and the
flags, and errors that name the variable to fix."""

from __future__ import annotations

import argparse

import pytest

from engine.config import ConfigError, build_config
from engine.config.env import env_layers
from evotui import options


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    options.add_run_flags(p)
    return p.parse_args(list(argv))


def test_only_double_underscore_names_are_config():
    layers = env_layers({"EVOTUI_DB": "x.db", "EVOTUI_UI_CONFIG": "ui.toml", "PATH": "/bin",
                         "EVOTUI_PIPELINE__MODE": "sync", "EVOTUI_TRACKING__MLFLOW__URI": "file:///m"})
    assert layers == [("environment variable EVOTUI_PIPELINE__MODE", {"pipeline": {"mode": "sync"}}),
                      ("environment variable EVOTUI_TRACKING__MLFLOW__URI",
                       {"tracking": {"mlflow": {"uri": "file:///m"}}})]


def test_values_take_their_fields_types():
    config = build_config(env_layers({"EVOTUI_BUDGET__MAX_PROPOSALS": "20", "EVOTUI_TASK_LLM__STREAM": "true",
                                      "EVOTUI_SIM__TIME_SCALE": "2.5",
                                      "EVOTUI_PIPELINE__WORKERS": '{"rollout": 3}'}))
    assert config.budget.max_proposals == 20
    assert config.task_llm.stream is True
    assert config.sim.time_scale == 2.5
    assert config.pipeline.workers["rollout"] == 3


def test_environment_is_above_the_file_and_below_the_flags(tmp_path, monkeypatch):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[pipeline]\nmode = "pxn"\nminibatch_size = 5\n[budget]\nmax_proposals = 9\n')
    monkeypatch.setenv("EVOTUI_PIPELINE__MODE", "sync")
    monkeypatch.setenv("EVOTUI_BUDGET__MAX_PROPOSALS", "11")
    config = build_config(options.config_layers(_args("--config", str(cfg), "--max-proposals", "13")))
    assert config.pipeline.mode == "sync"  # env over the file
    assert config.pipeline.minibatch_size == 5  # the file where the env says nothing
    assert config.budget.max_proposals == 13  # the flag over the env


def test_misspelled_key_names_the_variable(monkeypatch):
    monkeypatch.setenv("EVOTUI_PIPELINE__MODEE", "sync")
    with pytest.raises(ConfigError, match=r"environment variable EVOTUI_PIPELINE__MODEE: unknown key 'pipeline.modee'"):
        build_config(options.config_layers(_args()))


def test_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("EVOTUI_BUDGET__MAX_PROPOSALS", "many")
    with pytest.raises(ConfigError, match=r"EVOTUI_BUDGET__MAX_PROPOSALS: 'budget.max_proposals'"):
        build_config(options.config_layers(_args()))


@pytest.mark.parametrize("name", ["EVOTUI___MODE", "EVOTUI_PIPELINE__", "EVOTUI_PIPELINE___MODE"])
def test_malformed_names_are_refused(name):
    with pytest.raises(ConfigError, match=f"environment variable {name}: not EVOTUI_<SECTION>__<KEY>"):
        env_layers({name: "x"})


def test_broken_json_table_is_refused():
    with pytest.raises(ConfigError, match="EVOTUI_PIPELINE__WORKERS: .* is not valid JSON"):
        env_layers({"EVOTUI_PIPELINE__WORKERS": "{rollout: 3}"})
