"""Steering a real in-process run (built-in `rules` task, simulated backend): the guidance is in the
stored proposer requests of exactly N proposals, pin and ban change the parents picked, the acts
are rows that a resume replays, and the export carries the guidance."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from engine.steering import SteerError
from engine.steering import live as steering
from engine.store.store import read_only_open
from engine.trace.collect import collect

LAYERS = [("test", {"budget": {"max_proposals": 6}, "sim": {"time_scale": 2000.0}})]
ASYNC = [("test", {"budget": {"max_proposals": 6}, "sim": {"time_scale": 2000.0}, "pipeline": {"mode": "async"}})]
TEXT = "Prefer rules that name the colour first"


async def _propose_requests(db: Path, run_id: str) -> dict[str, str]:
    """item id -> the user message of its (last) propose request, from the stored LLM texts."""
    store = await read_only_open(db)
    try:
        return {c["item_id"]: c["messages"][-1]["content"] async for c in store.iter_llm_calls(run_id)
                if c["stage"] == "propose" and c["messages"]}
    finally:
        await store.close()


def _rows(db: Path, sql: str, *args) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


async def test_guidance_reaches_exactly_n_proposals_and_is_audited(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = await EngineRun.create("rules", LAYERS, db)
    events = run.bus.subscribe()
    act = steering.take(run.ctx, {"act": "guide", "text": TEXT, "count": 3}, "python")
    result = await run.run()
    assert result.status == "completed"
    requests = await _propose_requests(db, run.ctx.run_id)
    steered = sorted(i for i, text in requests.items() if "## Guidance from the operator" in text)
    assert len(requests) >= 5 and len(steered) == 3
    assert all(f"### #{act.act_id}\n> {TEXT}" in requests[i] for i in steered)
    rows = _rows(db, "SELECT act, target, text, count, item_id, by FROM steering WHERE run_id = ? ORDER BY act_id",
                 run.ctx.run_id)
    assert rows[0] == ("guide", None, TEXT, 3, None, "python")
    assert sorted(r[4] for r in rows[1:]) == steered and {r[0] for r in rows[1:]} == {"use"}
    assert any(e.kind == "steered" and e.act == "guide" for e in events.drain())
    # The committed children of steered proposals name it in their notes (lineage, export).
    notes = [m for (m,) in _rows(db, "SELECT meta_json FROM artifacts WHERE run_id = ?", run.ctx.run_id)
             if "operator_guidance" in m]
    items = dict(_rows(db, "SELECT item_id, payload_json FROM items WHERE run_id = ?", run.ctx.run_id))
    assert all(f"#{act.act_id}: {TEXT}" in items[i] for i in steered)
    assert all(TEXT in m for m in notes)
    # The EvoTrace export carries it: the proposer contexts (what a replay re-issues) and the notes.
    store = await read_only_open(db)
    try:
        trace = await collect(store, run.ctx.run_id)
    finally:
        await store.close()
    contexts = [c for c in trace.contexts if c["stage"] == "propose" and c["item_id"] in steered]
    assert len({c["item_id"] for c in contexts}) == 3
    assert all(f"> {TEXT}" in c["messages"][-1]["content"] for c in contexts)
    noted = [c for c in trace.candidates if TEXT in str(((c["item"] or {}).get("payload") or {}).get("notes"))]
    assert {c["item"]["item_id"] for c in noted} == set(steered)


async def test_pin_and_ban_change_the_parents_and_survive_a_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = await EngineRun.create("rules", ASYNC, db)
    result = await first.run()
    run_id, best = first.ctx.run_id, result.summary["best_id"]
    validated = [a for (a,) in _rows(db, "SELECT artifact_id FROM artifacts WHERE run_id = ? AND status IN "
                                         "('seed', 'confirmed') ORDER BY created_version", run_id)]
    other = next(a for a in validated if a != best)
    before = {i for (i,) in _rows(db, "SELECT item_id FROM items WHERE run_id = ?", run_id)}

    run = await EngineRun.resume(db, run_id, {"max_proposals": 16}, {})
    with pytest.raises(SteerError, match="no candidate 'a999999' in this run"):
        steering.take(run.ctx, {"act": "pin", "target": "a999999"}, "python")
    steering.take(run.ctx, {"act": "ban", "target": best}, "python")
    pin = steering.take(run.ctx, {"act": "pin", "target": other, "count": 4}, "python")
    guide = steering.take(run.ctx, {"act": "guide", "text": TEXT}, "python")  # until withdrawn
    assert (await run.run()).status == "completed"
    picked = [(i, p, payload) for i, p, payload in _rows(
        db, "SELECT item_id, parent_artifact_id, payload_json FROM items WHERE run_id = ? ORDER BY rowid", run_id)
        if i not in before]
    assert len(picked) >= 6
    parents = [p for _, p, _ in picked]
    assert parents[:4] == [other] * 4  # the pin took the next four picks
    assert best not in parents  # the ban: never picked again
    assert all(f'"steer_pin": {pin.act_id}' in payload for _, _, payload in picked[:4])

    again = await EngineRun.resume(db, run_id, {"max_proposals": 16}, {})
    try:
        view = again.ctx.steering.view()
        assert view["bans"] == [best] and view["pin"] is None  # four picks used it up
        assert [g["act_id"] for g in view["guidance"]] == [guide.act_id]
        assert again.ctx.steering.next_id == run.ctx.steering.next_id
    finally:
        await again.close()
