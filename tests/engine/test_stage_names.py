"""[pipeline] workers, min_workers and max_workers name stages of the run's own pipeline (issue 33):
the task kind and strategy declare the stages, the run's set-up checks the names against them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.config import PipelineConfig, build_config
from engine.run.runner import SetupError
from engine.run.setup import check_stage_names
from engine.strategy import SearchParams, build
from engine.strategy.protocols import StrategyStage
from tests.engine.fakes import harness  # noqa: F401  (harness is a fixture)

PROMPT_STAGES = "rollout, propose, evaluate, update, reflect"


async def test_a_stage_the_run_does_not_have_is_refused_with_the_runs_stages(harness) -> None:  # noqa: F811
    with pytest.raises(SetupError) as info:
        await harness.create(pipeline={"workers": {"validate": 2}})  # a program task's stage
    assert info.value.exit_code == 2
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("[pipeline] workers names stage 'validate', which this run does not have")
    assert f"this prompt task with strategy gepa has {PROMPT_STAGES}" in msg
    assert not harness.db.exists()  # refused before the run's database was kept


@pytest.mark.parametrize("table", ["min_workers", "max_workers"])
async def test_adaptive_bounds_name_stages_of_the_run_too(harness, table) -> None:  # noqa: F811
    with pytest.raises(SetupError, match=rf"\[pipeline\] {table} names stage 'rolout', .*has {PROMPT_STAGES}"):
        await harness.create(pipeline={table: {"rolout": 2}})


async def test_the_runs_own_stages_are_accepted_and_applied(harness) -> None:  # noqa: F811
    run = await harness.create(pipeline={"mode": "async", "workers": {"rollout": 3, "reflect": 2},
                                         "min_workers": {"evaluate": 2}})
    stages = run.orchestrator.stages
    assert (stages["rollout"].target_workers, stages["reflect"].target_workers) == (3, 2)
    assert stages["evaluate"].min_workers == 2
    assert run.ctx.setup_warnings == []
    await run.close()


async def test_a_strategys_own_stage_takes_workers_by_its_name(harness, monkeypatch) -> None:  # noqa: F811
    """The names come from the spec: a stage only a strategy declares can be given workers (the
    earlier fixed list refused it), and the same name is refused for a strategy without it."""
    import engine.run.runner as runner_mod

    async def plan(view, env) -> dict[str, str]:
        return {}

    base = build("gepa", "prompt", SearchParams())
    planned = replace(base, name="planned", stages=(StrategyStage("plan", "before_propose", plan, workers=3),))
    monkeypatch.setattr(runner_mod, "strategy_for", lambda ctx: planned)
    run = await harness.create(pipeline={"mode": "async", "workers": {"plan": 5}})
    assert run.orchestrator.stages["plan"].target_workers == 5
    await run.close()

    monkeypatch.setattr(runner_mod, "strategy_for", lambda ctx: base)
    with pytest.raises(SetupError, match=f"names stage 'plan'.*strategy gepa has {PROMPT_STAGES}"):
        await harness.create(pipeline={"mode": "async", "workers": {"plan": 5}})


def _program_like_spec():
    """A program task's stage names (the e2e test checks the real one on circle_packing)."""
    from engine.pipeline.spec import PipelineSpec, StageSpec

    async def run(item):
        return item

    return PipelineSpec(stages=tuple(StageSpec(n, run) for n in ("propose", "validate", "evaluate", "update")),
                        reflect=StageSpec("reflect", run), reflect_to="evaluate")


def test_a_resumed_run_keeps_going_with_a_warning() -> None:
    """A stored run was started under the fixed list of names, where a stage its kind lacks had no
    effect: resuming it warns instead of refusing a config the user cannot edit."""
    cfg = build_config([("stored run config", {"pipeline": {"workers": {"rollout": 16}}})])
    with pytest.raises(ValueError, match="workers names stage 'rollout'.*program task with strategy openevolve has "
                                         "propose, validate, evaluate, update, reflect"):
        check_stage_names(cfg, _program_like_spec(), "program", "openevolve", resumed=False)
    warnings = check_stage_names(cfg, _program_like_spec(), "program", "openevolve", resumed=True)
    assert len(warnings) == 1 and "'rollout'" in warnings[0] and warnings[0].endswith("it has no effect")


def test_only_keys_that_change_something_are_checked() -> None:
    """workers holds the defaults merged in (rollout among them, on every kind): a key at its default
    is not one the user named; a changed one is, and so is any name outside the defaults."""
    assert PipelineConfig().named_stages() == {"workers": [], "min_workers": [], "max_workers": []}
    cfg = PipelineConfig(workers={"rollout": 8, "validate": 2, "plan": 1}, max_workers={"update": 1})
    assert cfg.named_stages() == {"workers": ["validate", "plan"], "min_workers": [], "max_workers": ["update"]}
    assert check_stage_names(build_config([("cli", {"pipeline": {"workers": {"rollout": 8}}})]),
                             _program_like_spec(), "program", "openevolve", resumed=False) == []
