"""engine/ledger.py: each operation writes exactly its rows (in order) and its bus event; restore
moves the active best and survives a resume; only the ledger writes pool events (layering).

The ledger is driven directly on a run created by the fake harness (tests/engine/fakes.py): the
run is never started, so the only writes are the ledger's.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from engine import events as ev
from engine.items import MergeOf, WorkItem
from engine.pool import Artifact, PoolError
from engine.stages.program_stages import evaluation_rows as program_rows
from tests.engine.fakes import SEED_PROMPT, VAL_KEYWORDS, harness  # noqa: F401

WATCHED = ("upsert_artifact", "insert_lineage", "insert_evaluations", "insert_pool_event")
VAL_IDS = [f"v{n}" for n in range(len(VAL_KEYWORDS))]


class StoreSpy:
    """Delegates to the run's store and records every artifact and pool-event write, in order."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.ops: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name not in WATCHED:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.ops.append((name, args, kwargs))
            return attr(*args, **kwargs)
        return call

    def take(self) -> list[tuple]:
        """The recorded writes as short tuples, then forget them."""
        out = []
        for name, args, kw in self.ops:
            if name == "upsert_artifact":
                out.append((name, kw["artifact_id"], kw["status"]))
            elif name == "insert_lineage":
                out.append((name, args[1], args[2], args[3]))
            elif name == "insert_evaluations":
                out.append((name, args[1], len(args[2])))
            else:
                out.append((name, args[1], args[2], args[3]))
        self.ops.clear()
        return out


def scores(value: float) -> dict[str, float]:
    return {ex: value for ex in VAL_IDS}


def artifact(aid: str, parent: str | None, value: float, status: str = "confirmed") -> Artifact:
    return Artifact(artifact_id=aid, text=f"{SEED_PROMPT}\n{aid}", parent_ids=(parent,) if parent else (),
                    created_version=0, val_scores=scores(value), status=status, created_at=time.time())


def item(n: int, parent: str, merge: MergeOf | None = None) -> WorkItem:
    return WorkItem(item_id=f"i{n:06d}", created_version=1, parent_id=parent, minibatch=["t0", "t1"],
                    stage="update", created_at=time.time(), merge=merge)


async def start(harness) -> tuple[Any, StoreSpy, Any]:  # noqa: F811
    run = await harness.create()
    spy = StoreSpy(run.ctx.store)
    run.ctx.store = spy
    return run, spy, run.bus.subscribe()


async def close(run, spy: StoreSpy) -> None:
    run.ctx.store = spy.store
    await run.close()


async def test_seed_and_commit_write_their_rows_in_order(harness) -> None:  # noqa: F811
    run, spy, sub = await start(harness)
    ctx, ledger = run.ctx, run.ctx.ledger
    ledger.seed(artifact("a000000", None, 0.2, status="seed"), {"v0": "missing keyword alpha"})
    assert spy.take() == [("upsert_artifact", "a000000", "seed"), ("insert_evaluations", "a000000", 4),
                          ("insert_pool_event", 1, "add", "a000000")]
    assert sub.drain() == [] and ctx.seed_id == "a000000" and len(ctx.best_history) == 1

    it = item(1, "a000000")
    ledger.commit(it, artifact("a000001", "a000000", 0.5), {"v1": "ok"})
    assert spy.take() == [("upsert_artifact", "a000001", "confirmed"),
                          ("insert_lineage", "a000000", "a000001", "mutate"),
                          ("insert_evaluations", "a000001", 4), ("insert_pool_event", 2, "add", "a000001")]
    [accepted] = sub.drain()
    assert isinstance(accepted, ev.CandidateAccepted)
    assert (accepted.artifact_id, accepted.pool_version, accepted.best) == ("a000001", 2, True)
    assert ctx.tally.accepted == 1 and ctx.merges.due == 1 and len(ctx.best_history) == 2

    ledger.commit(item(2, "a000001", merge=MergeOf("a000001", "a000000", "a000000")),
                  artifact("a000002", "a000001", 0.4))
    assert ("insert_lineage", "a000001", "a000002", "merge") in spy.take()
    [accepted] = sub.drain()
    assert not accepted.best and ctx.tally.merges_accepted == 1 and ctx.merges.due == 1

    await ctx.store.flush()
    events = await harness.rows("pool_events", ctx.run_id)
    assert [(e["version"], e["kind"], e["artifact_id"]) for e in events] == [
        (1, "add", "a000000"), (2, "add", "a000001"), (3, "add", "a000002")]
    assert events[1]["detail"] == {"parent": "a000000", "val_mean": 0.5, "item_id": "i000001",
                                   "metric_calls": ctx.tally.metric_calls}  # the spend at acceptance (GEPAResult)
    evals = [e for e in await harness.rows("evaluations", ctx.run_id) if e["artifact_id"] == "a000001"]
    assert {e["example_id"]: e["feedback"] for e in evals}["v1"] == "ok"
    await close(run, spy)


async def test_speculative_insert_confirm_and_remove(harness) -> None:  # noqa: F811
    run, spy, sub = await start(harness)
    ctx, ledger = run.ctx, run.ctx.ledger
    ledger.seed(artifact("a000000", None, 0.2, status="seed"))
    spy.take()

    it = item(1, "a000000")
    change = ledger.insert_speculative(it, artifact("a000001", "a000000", 0.9, status="speculative"), 0.9, 0.2)
    assert change.version == 2 and ctx.tally.speculative_inserted == 1
    assert spy.take() == [("upsert_artifact", "a000001", "speculative"),
                          ("insert_lineage", "a000000", "a000001", "mutate"),
                          ("insert_evaluations", "a000001", 4), ("insert_pool_event", 2, "add", "a000001")]
    assert sub.drain() == [] and ledger.best().artifact_id == "a000000"  # never best unconfirmed

    stored = ledger.confirm(it, "a000001", scores(0.6), 0.6, 0.2, {"v0": "ok"})
    assert stored.status == "confirmed" and stored.val_mean == pytest.approx(0.6)
    assert spy.take() == [("upsert_artifact", "a000001", "confirmed"), ("insert_evaluations", "a000001", 4),
                          ("insert_pool_event", 3, "confirmed", "a000001")]  # lineage was written at the insert
    [accepted] = sub.drain()
    assert isinstance(accepted, ev.CandidateAccepted) and accepted.best and accepted.pool_version == 3
    assert (ctx.tally.speculative_confirmed, ctx.tally.accepted) == (1, 1)

    it2 = item(2, "a000001")
    ledger.insert_speculative(it2, artifact("a000002", "a000001", 0.9, status="speculative"), 0.9, 0.6)
    spy.take()
    removed = ledger.remove(it2, "a000002", {"reason": "its item ended before validation"})
    assert removed.status == "removed" and ctx.tally.speculative_removed == 1
    assert spy.take() == [("upsert_artifact", "a000002", "removed"), ("insert_evaluations", "a000002", 4),
                          ("insert_pool_event", 5, "removed", "a000002")]
    assert sub.drain() == [] and ctx.pool.version == 5
    await close(run, spy)


async def test_restore_moves_the_active_best_and_survives_a_resume(harness) -> None:  # noqa: F811
    run, spy, sub = await start(harness)
    ctx, ledger = run.ctx, run.ctx.ledger
    ledger.seed(artifact("a000000", None, 0.2, status="seed"))
    ledger.commit(item(1, "a000000"), artifact("a000001", "a000000", 0.5))
    ledger.commit(item(2, "a000001"), artifact("a000002", "a000001", 0.8))
    spy.take(), sub.drain()
    with pytest.raises(PoolError):
        ledger.restore("a009999", "no such artifact")

    change = ledger.restore("a000001", "a000002 overfits the validation set")
    assert change.version == 4 and ctx.pool.version == 4
    assert spy.take() == [("insert_pool_event", 4, "restore", "a000001")]  # the artifact itself is unchanged
    [restored] = sub.drain()
    assert isinstance(restored, ev.BestRestored)
    assert (restored.artifact_id, restored.previous_id, restored.pool_version) == ("a000001", "a000002", 4)
    # Every reader of the best follows the restore: the pool, hence snapshots and the summary.
    assert ledger.best().artifact_id == ctx.pool.best().artifact_id == run.snapshot().best_id == "a000001"
    assert ctx.pool.get("a000001").status == "confirmed"

    # Newer work must beat the restored artifact, not the one it replaced.
    ledger.commit(item(3, "a000001"), artifact("a000003", "a000001", 0.6))
    [accepted] = sub.drain()
    assert accepted.best and ledger.best().artifact_id == "a000003"
    ledger.restore("a000001", "back again")
    await ctx.store.flush()
    run_id = ctx.run_id
    await close(run, spy)

    run2 = await harness.resume(run_id)
    try:
        assert run2.ctx.pool.version == 6
        assert run2.ctx.ledger.last_restore().kind == "restore"
        assert run2.ctx.ledger.best().artifact_id == run2.snapshot().best_id == "a000001"
        run2.ctx.ledger.commit(item(4, "a000001"), artifact("a000004", "a000001", 0.55))
        assert run2.ctx.ledger.best().artifact_id == "a000004" and run2.ctx.pool.version == 7
        # A speculative artifact counts once confirmed, not before.
        spec = item(5, "a000004")
        run2.ctx.ledger.insert_speculative(spec, artifact("a000005", "a000004", 0.9, status="speculative"), 0.9, 0.55)
        assert run2.ctx.ledger.best().artifact_id == "a000004"
        run2.ctx.ledger.confirm(spec, "a000005", scores(0.7), 0.7, 0.55)
        assert run2.ctx.ledger.best().artifact_id == "a000005"
        await run2.ctx.store.flush()
        events = await harness.rows("pool_events", run_id)
        assert [e["version"] for e in events] == list(range(1, 10))
        assert [e["kind"] for e in events if e["kind"] == "restore"] == ["restore", "restore"]
        assert events[3]["detail"] == {"restore": True, "reason": "a000002 overfits the validation set",
                                       "previous_best": "a000002", "by": "engine"}
    finally:
        await run2.close()


async def test_a_run_with_speculation_keeps_rows_and_pool_in_step(harness) -> None:  # noqa: F811
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3, "speculation": True},
                               budget={"max_proposals": 6})
    result = await harness.run_to_end(run)
    assert result.exit_code == 0 and run.ctx.tally.speculative_inserted > 0
    record = await harness.record(run.ctx.run_id)
    assert "confirmed" in {e["kind"] for e in record.pool_events}
    assert [e["version"] for e in record.pool_events] == list(range(1, run.ctx.pool.version + 1))
    stored = {a["artifact_id"]: a["status"] for a in record.artifacts}
    assert stored == {a.artifact_id: a.status for a in run.ctx.pool.artifacts()}


def test_program_evaluation_rows() -> None:
    art = Artifact(artifact_id="a000001", text="x = 1\n", parent_ids=(), created_version=1,
                   val_scores={"combined_score": 0.5}, meta={"metrics": {"speed": 2}, "feedback": {"note": "slow"}})
    assert program_rows(art, {}) == [("combined_score", "program", 0.5, "note: slow", "evaluate"),
                                     ("speed", "metric", 2.0, None, "evaluate")]


# -- layering ------------------------------------------------------------------------------------

ENGINE = Path(__file__).resolve().parents[2] / "engine"
WRITERS = re.compile(r"\.insert_pool_event\(|\bpool\.(add|set_status)\(")


def test_only_the_ledger_writes_the_pool_and_its_events() -> None:
    offenders = []
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE).as_posix()
        if rel in ("ledger.py", "pool.py"):  # the writer, and the mutators themselves
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if WRITERS.search(line):
                offenders.append(f"engine/{rel}:{n}: {line.strip()}")
    assert offenders == [], "only engine/ledger.py may write the pool and pool_events:\n" + "\n".join(offenders)
    assert WRITERS.search((ENGINE / "ledger.py").read_text())
