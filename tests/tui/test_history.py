"""The plots' history: built from SQLite (so it survives resume and attach), extended from
snapshots only while running, and the derived rates and percentiles."""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

from engine.run.history import (
    RunHistory,
    SnapshotFeed,
    latency_lines,
    rate_line,
    score_lines,
)
from engine.run.history_db import load_history, open_reader
from engine.run.runner import EngineRun
from evotui.headless import drive
from evotui.tui.attach import AttachBackend
from evotui.tui.backend import LiveBackend

LAYER = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 12}}


async def finished_run(db):
    run = await EngineRun.create("rules", [("t", LAYER)], db)
    result = await drive(run, events_path=None, progress_every=60.0, quiet=True)
    return run, result


def count(db, sql: str, *args) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql, args).fetchone()[0])


async def test_history_from_the_database_matches_the_stored_run(tmp_path):
    db = tmp_path / "r.db"
    run, result = await finished_run(db)
    run_id = run.ctx.run_id
    h = await load_history(db, run_id)
    assert h is not None and h.simulated and h.time_scale == 400
    assert len(h.proposals) == count(db, "SELECT count(*) FROM item_stages WHERE run_id=? AND stage='propose'", run_id)
    assert len(h.calls) == count(db, "SELECT count(*) FROM llm_calls WHERE run_id=?", run_id)
    assert h.gaps == dict(run.snapshot().gap_histogram)
    assert h.best[-1][1] == result.summary["best_score"]
    assert {"rollout", "propose", "evaluate"} <= set(h.depth)
    assert all(d >= 0 for series in h.depth.values() for _, d in series)
    # Rates add up: the rate line integrates back to the number of proposals.
    now = h.last_t()
    line = rate_line(h, h.proposals, now, 10, "p")
    width_min = h.minutes(now) / 10
    assert round(sum(line.y) * width_min) == len(h.proposals)
    p50, p95 = latency_lines(h, now, 10)
    assert p50.x and all(a <= b for a, b in zip(p50.y, p95.y))
    assert p50.label == "p50 sim s"


async def test_a_resumed_run_starts_with_its_stored_history_and_extends_it(tmp_path):
    db = tmp_path / "r.db"
    run, _ = await finished_run(db)
    run_id = run.ctx.run_id
    stored = await load_history(db, run_id)
    resumed = await EngineRun.resume(db, run_id, {"max_proposals": 20})
    backend = LiveBackend(resumed)  # as `evotui resume` builds it, before its engine starts
    assert backend.history.revision == 0
    await backend.start()
    assert backend.feed.now == stored.last_t()  # the time axes start where the stored run ended
    frame = backend.frame()
    assert frame.history is backend.history and len(frame.history.calls) == len(stored.calls)
    assert frame.history_now >= round(stored.last_t(), 1)
    await resumed.run()  # closes the run and its store
    after = await load_history(db, run_id)
    # Every call the resumed run made was added once: the plots match what the database holds.
    assert len(backend.history.calls) == len(after.calls) > len(stored.calls)


async def test_attach_reads_the_history_and_then_only_new_calls(tmp_path):
    db = tmp_path / "r.db"
    run, _ = await finished_run(db)
    attach = AttachBackend(db, None)
    await attach.start()
    try:
        frame = attach.frame()
        stored = count(db, "SELECT count(*) FROM item_stages WHERE run_id=? AND stage='propose'", run.ctx.run_id)
        assert frame is not None and len(frame.history.proposals) == stored and frame.history.best
        reader = attach.reader
        assert reader is not None
        rev = reader.history.revision
        assert await reader.more(calls_only=True) is False and reader.history.revision == rev
    finally:
        await attach.close()


async def test_unknown_run_gives_no_reader(tmp_path):
    db = tmp_path / "r.db"
    await finished_run(db)
    assert await open_reader(db, "no-such-run") is None


def _snap(**kw):
    base = {"best_score": 0.5, "proposals": 3, "stages": (SimpleNamespace(name="propose", depth=2),),
            "gap_histogram": {0: 1}}
    return SimpleNamespace(**{**base, **kw})


def test_the_feed_records_changes_and_its_clock_runs_only_while_running():
    h = RunHistory(start=100.0)
    clock = iter([101.0, 102.0, 103.0, 104.0]).__next__
    feed = SnapshotFeed(h, clock=clock)
    feed.observe(_snap(), 0.4, idle=False)
    assert list(h.best) == [(1.0, 0.5)] and list(h.proposals) == [] and h.gaps == {0: 1}
    rev = h.revision
    feed.observe(_snap(), 0.4, idle=True)  # paused, nothing new: nothing moves, not even the clock
    assert h.revision == rev and feed.now == 1.0
    feed.observe(_snap(best_score=0.6), 0.4, idle=True)  # in-flight work landed while paused
    assert list(h.best)[-1] == (1.0, 0.6) and feed.now == 1.0
    rev = h.revision
    feed.observe(_snap(best_score=0.6), 0.4, idle=False)  # running, nothing new: only the clock moves
    assert h.revision == rev and feed.now == 2.0
    feed.observe(_snap(best_score=0.7, proposals=5, stages=(SimpleNamespace(name="propose", depth=0),)), 0.5,
                 idle=False)
    assert list(h.best)[-1] == (3.0, 0.7) and list(h.proposals) == [3.0, 3.0]
    assert list(h.depth["propose"]) == [(1.0, 2.0), (3.0, 0.0)]
    lines = score_lines(h, 10.0)
    assert [line.label for line in lines] == ["best", "mean"] and lines[0].x[-1] == 10.0 / 60
