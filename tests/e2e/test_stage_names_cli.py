"""A [pipeline] workers key names a stage of the run's own pipeline: one kind's stage is refused on
another kind's task, in one line naming the stages that task has, before any database is kept."""

import pytest

from tests.e2e.conftest import FAST, evotui


@pytest.mark.parametrize("task, key, stages", [
    ("circle_packing", "rollout",
     "program task with strategy openevolve has propose, validate, evaluate, update, reflect"),
    ("rules", "validate", "prompt task with strategy gepa has rollout, propose, evaluate, update, reflect"),
])
def test_another_kinds_stage_is_refused(db, task, key, stages):
    proc = evotui("run", task, "--no-ui", "--llm", "sim", "--db", str(db), "--workers", f"{key}=3", *FAST)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"evotui: error: [pipeline] workers names stage '{key}'"), lines
    assert stages in lines[0]
    assert not db.exists()
