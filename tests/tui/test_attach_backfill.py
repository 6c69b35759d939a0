"""An attached view backfills from the database (D5): the event log from the run's start, each
endpoint's latencies and tokens, the spend; and the review gate's evidence (D6): scores against
the parent (the parent's score too), staleness and the proposer's rationale, live through the
control socket."""

from __future__ import annotations

import asyncio
import sqlite3

from engine.run.runner import EngineRun
from evotui.headless import drive
from evotui.tui.attach import AttachBackend
from evotui.tui.attach_rows import rationale_of
from evotui.tui.backend import LiveBackend
from evotui.tui.widgets.evidence import evidence_text


def _config(**extra):
    return [("t", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 10}, **extra})]


async def test_a_finished_run_attached_backfills_its_log_latencies_and_spend(tmp_path):
    db = tmp_path / "r.db"
    run = await EngineRun.create("rules", _config(), db)
    result = await drive(run, events_path=None, progress_every=60.0, quiet=True)
    backend = AttachBackend(db, None)
    await backend.start()
    try:
        lines = backend.poll()
        con = sqlite3.connect(db)
        adds = con.execute("SELECT count(*) FROM pool_events WHERE kind = 'add' AND detail_json NOT LIKE '%\"seed\"%'").fetchone()[0]
        rejected = con.execute("SELECT count(*) FROM items WHERE outcome = 'rejected'").fetchone()[0]
        calls = con.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
        con.close()
        accepts = [line for line in lines if " candidate_accepted: " in line]
        assert len(accepts) == adds == result.summary["accepted"] > 0
        assert any("NEW BEST" in line for line in accepts)
        assert sum(" candidate_rejected " in line for line in lines) == rejected
        assert lines[0].split()[1] == "seed", "the backfill is in time order: the seed came first"
        await backend._refresh()
        assert backend.poll() == [], "nothing is logged twice"
        frame = backend.frame()
        assert sum(s.calls for s in frame.llm) == calls
        assert all(s.p50_s is not None and s.p95_s is not None and s.tokens_in > 0 for s in frame.llm)
        assert sum(v["calls"] for v in frame.spend["by_stage"].values()) == calls
        assert frame.spend["usd"] == run.ctx.budget.meter.figures()["usd"]
    finally:
        await backend.close()


async def test_an_attached_review_gate_shows_scores_parent_score_and_rationale(tmp_path):
    db = tmp_path / "r.db"
    run = await EngineRun.create("rules", _config(pipeline={"review_before_evaluate": True}), db)
    in_process = LiveBackend(run)  # the TUI of a run it drives: rationale from the call sink
    driver = asyncio.create_task(drive(run, events_path=None, progress_every=60.0, quiet=True))
    backend = AttachBackend(db, None)
    try:
        for _ in range(2000):  # the driver parks its first proposals for review
            if run.review.pending() and list(tmp_path.glob("r.db.*.sock")):
                break
            await asyncio.sleep(0.01)
        await run.ctx.store.flush()
        await backend.start()
        assert backend.can_control and backend.pending()
        item = backend.pending()[0]
        ev = backend.evidence(item.item_id)
        assert ev is not None, "the attached view has the item's evidence"
        live = LiveBackend(run).evidence(item.item_id)  # the same item as the driver holds it
        assert (ev.child_mb, ev.parent_mb, ev.child_score, dict(ev.gaps)) == (
            live.child_mb, live.parent_mb, live.child_score, dict(live.gaps))
        assert ev.parent_mb or ev.child_mb, "the minibatch scores reached the gate"
        parent = run.ctx.pool.get(item.parent_id)
        assert ev.parent_score == parent.val_mean is not None
        assert ev.staleness and all(" gap " in s for s in ev.staleness)
        assert ev.rationale.startswith("from ") and "```" not in ev.rationale
        assert in_process.evidence(item.item_id).rationale == ev.rationale
        text = str(evidence_text(item, ev, None, None))
        assert f"parent {item.parent_id} {parent.val_mean:.3f}" in text and "rationale" in text
    finally:
        run.stop("test over")
        await asyncio.wait_for(driver, 60)
        await backend.close()


def test_the_rationale_is_the_reply_outside_its_code_blocks():
    reply = "Reasoning: from 3 feedback line(s) I added a rule.\n```\nnew instructions\n```\nDone."
    assert rationale_of(reply) == "from 3 feedback line(s) I added a rule. Done."
    assert rationale_of("```\nonly code\n```") == "" and rationale_of(None) == ""
    assert rationale_of("x" * 1000).endswith("…") and len(rationale_of("x" * 1000)) == 400
