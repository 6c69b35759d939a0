"""`evotui tune --add`: the tuned program enters the run's pool as a new artifact whose lineage
edge from the candidate has operator `tune`.

Like `evotui restore` on a run nobody drives (engine/run/admin.py): the run is opened under its
lease (a live driver refuses it), the pool is rebuilt from its rows, the ledger (the only writer
of the pool) commits the artifact, the run state is saved and the run keeps the status it had.
The artifact's id comes from the run's own item counter, so later proposals never reuse it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.pool import Artifact, PoolError
from engine.trace.errors import TraceError

OPERATOR = "tune"
SCORE_KEY = "program"


async def check_addable(db: Path, run_id: str, artifact_id: str) -> None:
    """Before any trial: the run accepts a new artifact (it exists, is not imported)."""
    from engine.run.admin import AdminError, find_artifact

    try:
        await find_artifact(db, run_id, artifact_id, writable=True)
    except AdminError as exc:
        raise TraceError(str(exc)) from None


async def add_tuned(db: Path, result: dict[str, Any]) -> dict[str, Any]:
    """Commit result["tuned_program"]; returns {"artifact_id", "pool_version", "best"}."""
    from engine.run.admin import AdminError, find_artifact
    from engine.run.runner import EngineRun, SetupError

    if result.get("tuned_program") is None or result.get("tuned_ceiling") is None:
        raise TraceError("no trial scored, so there is no tuned program to add")
    run_id, parent = result["run_id"], result["candidate_id"]
    try:
        found = await find_artifact(db, run_id, parent, writable=True)
    except AdminError as exc:
        raise TraceError(str(exc)) from None
    try:
        run = await EngineRun.resume(db, run_id, {}, {})
    except SetupError as exc:
        raise TraceError(str(exc)) from None
    try:
        ctx = run.ctx
        artifact_id = f"a{ctx.next_item_id()[1:]}"
        score = float(result["tuned_ceiling"])
        art = Artifact(artifact_id=artifact_id, text=result["tuned_program"], parent_ids=(parent,),
                       created_version=0, val_scores={SCORE_KEY: score}, created_at=time.time(),
                       meta={"operator": OPERATOR, "tuned_from": parent, "evolved_score": result["evolved_score"],
                             "knobs": {k["name"]: k["tuned"] for k in result["knobs"]},
                             "trials": result["trials"], "seed": result["seed"],
                             "feedback": {"tune": f"tuned {len(result['knobs'])} knobs of {parent} "
                                                  f"in {result['trials']} trials"}})
        try:
            stored = ctx.ledger.add_external(art, OPERATOR, {"tuned_from": parent})
        except PoolError as exc:
            raise TraceError(f"cannot add the tuned program: {exc}") from None
        run.orchestrator.recorder.save_run_state()
        best = ctx.ledger.best()
        summary = found.run.get("summary")
        if isinstance(summary, dict) and best is not None:
            summary = {**summary, "best_id": best.artifact_id, "best_score": best.val_mean,
                       "pool_version": ctx.pool.version}
        ctx.store.update_run(run_id, status=found.run["status"], summary_json=summary, updated_at=time.time())
        await ctx.store.flush()
        return {"artifact_id": stored.artifact_id, "pool_version": ctx.pool.version,
                "best": best.artifact_id if best else None}
    finally:
        await run.close()
