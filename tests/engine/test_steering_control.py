"""Steering through the control socket (what `evotui steer` and an attached TUI send): each act
is committed before the reply, refusals are one-line errors, a re-evaluation really runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from evotui.control import ControlClient, ControlError, ControlServer, socket_path

LAYERS = [("test", {"budget": {"max_proposals": 4}, "sim": {"time_scale": 2000.0}, "pipeline": {"mode": "async"}})]


def _steering_rows(db: Path, run_id: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT act_id, act, target, by, detail_json FROM steering WHERE run_id = ? ORDER BY act_id",
                           (run_id,)).fetchall()
    finally:
        con.close()


async def test_acts_over_the_socket_are_committed_before_the_reply(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = await EngineRun.create("rules", LAYERS, db)
    result = await first.run()
    best = result.summary["best_id"]
    run = await EngineRun.resume(db, first.ctx.run_id, {"max_proposals": 8}, {})
    path = socket_path(db, run.ctx.run_id)
    server = ControlServer(run, path)
    assert await server.start()
    client = ControlClient(path)
    assert await client.connect()
    try:
        reply = await client.request("steer", act="guide", text="name the separator rule first", count=2, by="cli")
        assert reply["lines"] == ["guidance #1 for 2 proposals: name the separator rule first"]
        assert _steering_rows(db, run.ctx.run_id)[0][:4] == (1, "guide", None, "cli")  # on disk already

        with pytest.raises(ControlError, match="no candidate 'nope' in this run"):
            await client.request("steer", act="pin", target="nope")
        with pytest.raises(ControlError, match="guidance #7 is not active"):
            await client.request("steer", act="unguide", target="7")
        with pytest.raises(ControlError, match="unknown requester 'mallory'"):
            await client.request("steer", act="unpin", by="mallory")

        reply = await client.request("steer", act="reeval", target=best, heldout=True, reply_timeout_s=120.0)
        request, done = reply["acts"]
        assert (request["act"], done["act"], done["detail"]["split"]) == ("reeval", "reevaluated", "heldout")
        assert done["detail"]["n"] == len(run.ctx.task.heldout) > 0
        assert 0.0 <= done["detail"]["mean"] <= 1.0 and reply["state"]["reevals"] == []
        with pytest.raises(ControlError, match="training examples the candidate was not validated on; ask for at most"):
            await client.request("steer", act="reeval", target=best, examples=10_000)
        reply = await client.request("steer", act="reeval", target=best, examples=3, reply_timeout_s=120.0)
        more = reply["acts"][1]["detail"]
        assert (more["split"], more["n"]) == ("train", 3)
        assert not set(more["scores"]) & set(run.ctx.pool.get(best).val_scores)  # examples it was not validated on

        status = await client.request("steering")
        assert [a["act"] for a in status["history"]] == ["guide", "reeval", "reevaluated", "reeval", "reevaluated"]
        assert status["guidance"][0]["left"] == 2
        rows = _steering_rows(db, run.ctx.run_id)
        assert [r[1] for r in rows] == ["guide", "reeval", "reevaluated", "reeval", "reevaluated"]
        assert rows[1][3] == "control" and rows[2][3] == "engine"
    finally:
        await client.close()
        await server.close()
        await run.close()
