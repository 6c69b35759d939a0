"""Run configuration: layered merge, validation messages that name key and layer, TOML reading."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from engine.config import (
    SIM_URL,
    ConfigError,
    EndpointConfig,
    RunConfig,
    build_config,
    deep_merge,
    read_toml,
)


def test_no_layers_gives_defaults() -> None:
    cfg = build_config([])
    assert cfg == RunConfig()
    assert cfg.task_llm.url == SIM_URL
    assert cfg.pipeline.mode == "async" and cfg.pipeline.policy == "full"
    assert cfg.pipeline.workers == {"select": 1, "rollout": 8, "propose": 8, "evaluate": 8, "update": 1, "reflect": 4}
    assert cfg.budget.max_tokens is None
    assert cfg.uses_sim


def test_later_layers_override_and_nested_tables_merge() -> None:
    cfg = build_config(
        [
            ("defaults of task.toml", {"seed": 1, "pipeline": {"mode": "sync", "max_gap": 5}, "budget": {"max_proposals": 10}}),
            ("--config run.toml", {"pipeline": {"max_gap": 1}, "budget": {"max_tokens": 5000}}),
            ("command line", {"seed": 9, "budget": {"max_proposals": 3}}),
        ]
    )
    assert cfg.seed == 9
    assert cfg.pipeline.mode == "sync"  # kept from the first layer
    assert cfg.pipeline.max_gap == 1  # overridden by the second
    assert cfg.budget.max_proposals == 3
    assert cfg.budget.max_tokens == 5000


def test_deep_merge_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": {"d": 2}}, "x": 1}
    over = {"a": {"c": {"e": 3}}, "x": {"now": "a table"}}
    merged = deep_merge(base, over)
    assert merged == {"a": {"b": 1, "c": {"d": 2, "e": 3}}, "x": {"now": "a table"}}
    assert base == {"a": {"b": 1, "c": {"d": 2}}, "x": 1}
    assert over == {"a": {"c": {"e": 3}}, "x": {"now": "a table"}}


def test_unknown_key_names_key_and_layer() -> None:
    layers = [
        ("defaults of task.toml", {"pipeline": {"mode": "sync"}}),
        ("--config run.toml", {"pipeline": {"queue_capcity": 4}}),
        ("command line", {"seed": 3}),
    ]
    with pytest.raises(ConfigError) as info:
        build_config(layers)
    msg = str(info.value)
    assert msg.startswith("--config run.toml: ")
    assert "unknown key 'pipeline.queue_capcity'" in msg
    assert "defaults of task.toml" not in msg


def test_unknown_top_level_key() -> None:
    with pytest.raises(ConfigError, match=r"^cli: unknown key 'budgets'"):
        build_config([("cli", {"budgets": {"max_tokens": 1}})])


def test_invalid_value_names_key_and_layer() -> None:
    with pytest.raises(ConfigError) as info:
        build_config([("ok", {}), ("flags", {"budget": {"max_tokens": -5}})])
    msg = str(info.value)
    assert msg.startswith("flags: 'budget.max_tokens': ")
    assert "greater than 0" in msg


def test_bad_literal() -> None:
    with pytest.raises(ConfigError, match=r"'pipeline.policy'"):
        build_config([("cli", {"pipeline": {"policy": "lazy"}})])


# Stage names are checked against the run's own pipeline at set-up: tests/engine/test_stage_names.py.
def test_worker_count_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="stage 'propose' needs at least 1 worker"):
        build_config([("cli", {"pipeline": {"workers": {"propose": 0}}})])


@pytest.mark.parametrize("url", ["ftp://host/v1", "localhost:8000/v1", "", "sim:/"])
def test_url_validation_rejects_other_schemes(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config([("cli", {"task_llm": {"url": url}})])
    msg = str(info.value)
    assert "'task_llm.url'" in msg
    assert "must be sim://, local:// or start with http:// or https://" in msg


@pytest.mark.parametrize(
    "url, stored",
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://api.example.com/v1/", "https://api.example.com/v1"),
        ("http://h/v1///", "http://h/v1"),
    ],
)
def test_http_urls_are_accepted_without_trailing_slash(url: str, stored: str) -> None:
    cfg = build_config([("cli", {"reflection_llm": {"url": url}})])
    assert cfg.reflection_llm is not None
    assert cfg.reflection_llm.url == stored
    assert cfg.reflection.url == stored


def test_explicit_sim_url_is_kept() -> None:
    cfg = build_config([("run.toml", {"task_llm": {"url": "sim://"}})])
    assert cfg.task_llm.url == SIM_URL
    assert cfg.uses_sim


def test_stored_config_round_trips_through_build_config() -> None:
    cfg = build_config([("cli", {"seed": 4, "pipeline": {"mode": "sync"}})])
    again = build_config([("stored run config", cfg.model_dump(mode="json")), ("command line", {"budget": {}})])
    assert again == cfg


def test_stored_http_config_round_trips() -> None:
    cfg = build_config([("cli", {"task_llm": {"url": "http://h:1/v1"}, "budget": {"max_wall_s": 60}})])
    again = build_config([("stored run config", cfg.model_dump(mode="json")), ("command line", {"budget": {"max_tokens": 9}})])
    assert again.task_llm == cfg.task_llm
    assert again.budget.max_wall_s == 60 and again.budget.max_tokens == 9


def test_reflection_defaults_to_task_llm() -> None:
    cfg = build_config([("cli", {"task_llm": {"url": "http://h/v1", "model": "m1"}})])
    assert cfg.reflection_llm is None
    assert cfg.reflection is cfg.task_llm
    assert not cfg.uses_sim

    both = build_config(
        [("cli", {"task_llm": {"url": "http://h/v1", "model": "m1"}, "reflection_llm": {"url": "https://r/v1", "model": "big"}})]
    )
    assert both.reflection is both.reflection_llm
    assert both.reflection.model == "big"
    assert both.task_llm.model == "m1"
    assert not both.uses_sim


def test_uses_sim_when_either_endpoint_is_simulated() -> None:
    # reflection_llm left at its defaults is the simulator (default url is sim://)
    cfg = build_config([("cli", {"task_llm": {"url": "http://h/v1"}, "reflection_llm": {"model": "x"}})])
    assert cfg.reflection.url == SIM_URL
    assert cfg.uses_sim


def test_models_validate_assignment() -> None:
    cfg = RunConfig()
    with pytest.raises(ValidationError):
        cfg.pipeline.max_gap = -1
    with pytest.raises(ValidationError):
        EndpointConfig(url="http://h/v1", max_concurrency=0)


def test_partial_workers_override_keeps_other_defaults() -> None:
    cfg = build_config([("run.toml", {"pipeline": {"workers": {"rollout": 16}}})])
    assert cfg.pipeline.workers["rollout"] == 16
    assert cfg.pipeline.workers.get("propose") == 8


def test_error_blames_the_layer_that_introduced_the_final_problem() -> None:
    layers = [
        ("defaults of task.toml", {"pipeline": {"max_gap": -1}}),
        ("--config run.toml", {"pipeline": {"max_gap": 2}, "bogus": True}),
    ]
    with pytest.raises(ConfigError) as info:
        build_config(layers)
    assert str(info.value).startswith("--config run.toml: unknown key 'bogus'")


def test_fixed_earlier_layer_is_not_an_error() -> None:
    cfg = build_config([("task", {"pipeline": {"max_gap": -1}}), ("cli", {"pipeline": {"max_gap": 3}})])
    assert cfg.pipeline.max_gap == 3


# -- reading TOML -----------------------------------------------------------------------------------


def test_read_toml(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('seed = 5\n[pipeline]\nmode = "sync"\n[budget]\nmax_wall_s = 1.5\n')
    data = read_toml(path)
    assert data == {"seed": 5, "pipeline": {"mode": "sync"}, "budget": {"max_wall_s": 1.5}}
    cfg = build_config([(str(path), data)])
    assert cfg.seed == 5 and cfg.pipeline.mode == "sync" and cfg.budget.max_wall_s == 1.5


def test_read_toml_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        read_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = = 3\n")
    with pytest.raises(ConfigError) as info:
        read_toml(bad)
    assert str(bad) in str(info.value) and "not valid TOML" in str(info.value)


def test_gap_threshold_defaults_per_policy_and_an_explicit_max_gap_wins() -> None:
    from engine.config import PipelineConfig

    unset = PipelineConfig()
    assert (unset.gap_for("guarded"), unset.gap_for("reflective"), unset.gap_for("full")) == (2, 0, 0)
    explicit = PipelineConfig(max_gap=3)
    assert (explicit.gap_for("guarded"), explicit.gap_for("reflective")) == (3, 3)


async def test_runtime_policy_switch_uses_the_new_policys_default_gap(tmp_path) -> None:
    from engine.run.runner import EngineRun

    run = await EngineRun.create("rules", [("test", {"budget": {"max_proposals": 1}, "sim": {"time_scale": 1000},
                                                     "pipeline": {"mode": "async"}})], tmp_path / "r.db")
    try:
        run.set_policy("reflective")
        assert (run.ctx.policy.name, run.ctx.policy.max_gap) == ("reflective", 0)
        run.set_policy("guarded")
        assert (run.ctx.policy.name, run.ctx.policy.max_gap) == ("guarded", 2)
        run.set_policy("guarded", 5)
        assert run.ctx.policy.max_gap == 5
    finally:
        await run.close()


async def test_new_runs_default_to_mode_chain_unless_asked_otherwise(tmp_path) -> None:
    """The fastest quality-keeping mode is the default of prompt tasks (bench --peers) and of
    program tasks under openevolve (bench against sync and async); a chosen mode, an option only
    async serves, or a strategy chain was not measured with keeps the plain default (async)."""
    from engine.run.runner import EngineRun

    base = {"budget": {"max_proposals": 1}, "sim": {"time_scale": 1000}}
    cases = [("rules", {}, "chain"), ("rules", {"pipeline": {"mode": "sync"}}, "sync"),
             ("rules", {"pipeline": {"policy": "reflective"}}, "async"),
             ("rules", {"pipeline": {"merge": True}}, "async"),
             ("rules", {"strategy": {"name": "openevolve"}}, "async"),
             ("circle_packing", {}, "chain"), ("circle_packing", {"strategy": {"name": "loongflow"}}, "async"),
             ("circle_packing", {"pipeline": {"policy": "reflective"}}, "async")]
    for k, (task, layer, mode) in enumerate(cases):
        run = await EngineRun.create(task, [("test", {**base, **layer})], tmp_path / f"r{k}.db")
        try:
            assert run.ctx.config.pipeline.mode == mode, (task, layer)
        finally:
            await run.close()
