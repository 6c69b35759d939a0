"""`evotui resume` on a database that holds no run (a run killed before it wrote its row) says
so and how to start one, instead of "no run None"."""

from __future__ import annotations

import pytest

from engine.run.runner import EngineRun, SetupError
from engine.store.store import Store


async def test_resume_of_a_database_without_runs_names_what_to_do(tmp_path) -> None:
    db = tmp_path / "empty.db"
    store = await Store.open(db, create=True)
    await store.close()
    with pytest.raises(SetupError, match=r"holds no run to resume .* `evotui run TASK --db "):
        await EngineRun.resume(db, None, {}, {})
    with pytest.raises(SetupError, match="no run 'r1' in"):
        await EngineRun.resume(db, "r1", {}, {})
