"""Branch from the TUI's steering dialog (evotui/tui/screens/steer_branch.py): the branch is an
`evotui branch` process of its own whose run starts from the chosen candidate; refusals name the
problem before anything starts."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from evotui.tui.attach import AttachBackend
from evotui.tui.screens.steer_branch import BranchError, start_branch
from tests.e2e.conftest import FAST, evotui, read_rows, summary_of, wait_until


def _pid_of(line: str) -> int:
    return int(line.split("(pid ", 1)[1].split(",", 1)[0])


def test_a_branch_from_the_dialog_starts_from_the_chosen_candidate(db: Path) -> None:
    res = evotui("run", "rules", "--no-ui", "--db", str(db), "--max-proposals", "6", "--mode", "async", *FAST)
    assert res.returncode == 0, res.stderr
    source = summary_of(res)
    chosen = next(a for (a,) in read_rows(db, "SELECT artifact_id FROM artifacts WHERE run_id = ? AND status IN "
                                              "('seed', 'confirmed') ORDER BY created_version DESC", source["run_id"]))

    async def go() -> str:
        backend = AttachBackend(db, source["run_id"])
        await backend.start()
        try:
            with pytest.raises(BranchError, match="no candidate 'zz' in this run"):
                start_branch(backend, "zz")
            with pytest.raises(BranchError, match="name a candidate"):
                start_branch(backend, "")
            return start_branch(backend, chosen)
        finally:
            await backend.close()

    line = asyncio.run(go())
    assert f"branch of {source['run_id']} from {chosen} started" in line
    pid = _pid_of(line)

    def ended() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        done, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it
        return done == pid

    wait_until(ended, "the branch process to finish", 300.0)
    runs = [r for (r,) in read_rows(db, "SELECT run_id FROM runs WHERE run_id != ?", source["run_id"])]
    assert len(runs) == 1, list(db.parent.glob("*.log"))
    [(text, meta)] = read_rows(db, "SELECT text, meta_json FROM artifacts WHERE run_id = ? AND status = 'seed'", runs[0])
    [(original,)] = read_rows(db, "SELECT text FROM artifacts WHERE run_id = ? AND artifact_id = ?",
                              source["run_id"], chosen)
    assert text == original
    assert json.loads(meta)["branched_from"] == {"run_id": source["run_id"], "artifact_id": chosen}
    logs = list(db.parent.glob(f"{db.name}.branch-{chosen}-*.log"))
    assert len(logs) == 1 and "Traceback" not in logs[0].read_text()
