"""Speculative rollout completion from the CLI (issue 36, FlashEvolve §3.3): rules in mode async with
`[pipeline] speculative_rollout = 0.6` on the simulator. The proposer of an item released early
reflects on exactly the answers the item says it saw; the late answer is joined before the gate,
so the stored item holds the whole minibatch, and every rollout request of the item is stored.
Mode chain, and a program task, refuse the option in one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from engine.store.store import read_only_open
from tests.e2e.conftest import ROOT, evotui, read_rows, summary_of

# A low time scale: a minibatch's answers then end tens of milliseconds apart in wall time, so the
# release after 2 of 3 is visible (at 2000x a 12-proposal run released no item early).
SLOW = ["--time-scale", "50", "--quiet"]


def _config(tmp: Path, body: str) -> Path:
    path = tmp / "run.toml"
    path.write_text(body)
    return path


@pytest.fixture(scope="module")
def spec_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("spec_rollout")
    db = base / "runs.db"
    cfg = _config(base, "[pipeline]\nspeculative_rollout = 0.6\n")  # no mode named: the option keeps it async
    res = evotui("run", str(ROOT / "tasks" / "rules"), "--no-ui", "--config", str(cfg), "--db", str(db),
                 "--max-proposals", "8", "--seed", "1", *SLOW, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return db, summary_of(res)


async def _calls(db: Path, run_id: str) -> list[dict]:
    store = await read_only_open(db)
    try:
        return [c async for c in store.iter_llm_calls(run_id)]
    finally:
        await store.close()


def test_the_proposer_sees_the_released_answers_and_the_gate_the_whole_minibatch(spec_run) -> None:
    db, summary = spec_run
    assert summary["mode"] == "async"
    items = {item: json.loads(p) for item, p in read_rows(
        db, "SELECT item_id, payload_json FROM items WHERE run_id = ? AND parent_artifact_id IS NOT NULL "
            "AND outcome != 'skipped'", summary["run_id"])}  # skipped: a perfect minibatch, no proposal
    calls = asyncio.run(_calls(db, summary["run_id"]))
    released = 0
    for item_id, payload in items.items():
        record = payload["speculative_rollout"]
        assert record["of"] == 3 and len(record["seen"]) + record["late"] == 3
        released += record["late"] > 0
        mine = [c for c in calls if c["item_id"] == item_id]
        assert sorted(c["stage"] for c in mine if c["stage"] == "rollout") == ["rollout"] * 3  # all stored
        (propose,) = [c for c in mine if c["stage"] == "propose"]
        assert propose["messages"][-1]["content"].count("### Example ") == len(record["seen"])
        if payload.get("child_mb") is not None:  # reached the gate: the whole minibatch was joined
            assert record["joined"] is True
            assert [t["example_id"] for t in payload["traces"]] == payload["minibatch"]
            assert len(payload["parent_mb"]) == 3
    assert released >= 1, items


def test_mode_chain_refuses_speculative_rollout_in_one_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[pipeline]\nmode = "chain"\nspeculative_rollout = 0.6\n')
    res = evotui("run", str(ROOT / "tasks" / "rules"), "--no-ui", "--config", str(cfg), "--db",
                 str(tmp_path / "r.db"), "--max-proposals", "2", *SLOW)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-1000:]
    assert "speculative_rollout applies to modes async, sync and pxn; mode chain" in res.stderr


def test_a_program_task_refuses_speculative_rollout_in_one_line(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[pipeline]\nmode = "async"\nspeculative_rollout = 0.6\n')
    res = evotui("run", str(ROOT / "tasks" / "circle_packing"), "--no-ui", "--config", str(cfg), "--db",
                 str(tmp_path / "r.db"), "--max-proposals", "2", *SLOW)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-1000:]
    assert "task circle_packing: speculative_rollout releases a prompt's minibatch rollout early" in res.stderr
    assert not (tmp_path / "r.db").exists()  # refused before any database file
