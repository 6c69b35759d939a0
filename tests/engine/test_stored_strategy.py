"""A run stored by an earlier release keeps the behaviour it ran with when a later release adds a
setting with another default (loongflow's migration_trigger: "interval" before, "diversity" now)."""

from engine.strategy.islands_view import island_options
from engine.config.strategy import upgrade_stored_strategy
from engine.strategy.loongflow import LoongFlowOptions


def test_a_stored_table_without_the_new_setting_keeps_the_old_behaviour():
    old = {"name": "loongflow", "loongflow": {"islands": 3, "migration_interval": 10}}
    assert upgrade_stored_strategy(old)["loongflow"]["migration_trigger"] == "interval"
    assert island_options(old)["migration_trigger"] == "interval"
    assert old["loongflow"] == {"islands": 3, "migration_interval": 10}  # the stored row is not changed


def test_a_table_that_names_it_and_a_new_run_keep_their_own():
    stored_new = {"name": "loongflow", "loongflow": LoongFlowOptions().model_dump()}
    assert upgrade_stored_strategy(stored_new)["loongflow"]["migration_trigger"] == "diversity"
    assert upgrade_stored_strategy({"name": "gepa"}) == {"name": "gepa"}
