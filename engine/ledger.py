"""The ledger: the only writer of a run's pool, its artifact rows and its pool_events rows.

Rule (checked by tests/engine/test_ledger.py): nothing but this module calls `pool.add`,
`pool.set_status` or `store.insert_pool_event`. Stages build an Artifact and hand it over;
the ledger commits it. (`Pool.restore`, which rebuilds the pool from these rows on resume, is
the one other pool mutator: it writes nothing.)

Every operation does the same steps in the same order:

    pool change -> artifact row -> lineage rows -> evaluation rows -> pool_events row
                -> counters -> bus event (where the operation has one)

The store's single writer commits its ops in the order they were enqueued, so a kill leaves a
prefix of that sequence: a pool_events row is never written without its artifact row, and on
resume the pool is rebuilt from exactly the pool_events rows that made it.

Bus events are the ones the stages always published: CandidateAccepted for commit and confirm,
BestRestored for restore; seeding and the speculative insert/remove have none.

Restore: `restore(artifact_id, reason)` makes an earlier fully validated artifact the run's
active best. It is recorded as a status change of that artifact to its own status (it bumps
the version and is in the changelog, so stale items see it) whose pool_events row has kind
"restore" and detail {"restore": true, ...}. `Pool.best()` follows it: after the newest
restore, the best is the restored artifact unless one added or confirmed since is strictly
better; every reader of the best (summary, snapshots, merge and speculation thresholds, chain
heads) sees that, and the pool rebuilt on resume finds the restore in its changelog.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence

from engine import components
from engine import events as ev
from engine.items import WorkItem
from engine.pool import RESTORE, ROLLED_BACK, Artifact, Pool, PoolChange, PoolError, is_confirmed

if TYPE_CHECKING:
    from engine.events import EventBus
    from engine.run.state import MergeState, Tally
    from engine.store.store import Store

EvalRow = tuple[str, str, "float | None", "str | None", "str | None"]
"""(example_id, split, score, feedback, stage): one row of the evaluations table."""

EvalRows = Callable[[Artifact, Mapping[str, str]], list[EvalRow]]
"""The task's evaluation rows of an artifact, given the feedback per example."""


class LedgerHost(Protocol):
    """What the ledger writes through: the part of a run's context it uses (engine/context.py:
    RunContext provides it). Named here so the ledger does not depend on the context, which
    holds the ledger."""

    run_id: str
    seed_id: str
    pool: Pool
    store: Store
    bus: EventBus
    tally: Tally
    merges: MergeState
    best_history: list[tuple[float, float]]

    def elapsed(self) -> float: ...


class Ledger:
    """Commits artifacts of one run. `rows` turns an artifact and its feedback into evaluation
    rows: prompt and program tasks store their scores differently."""

    def __init__(self, ctx: LedgerHost, rows: EvalRows) -> None:
        self.ctx = ctx
        self.rows = rows
        self.seed_meta: dict = {}
        """Meta the seed artifact gets besides its own (a branch records where it came from)."""
        self._migrated: set[tuple[int, int, int]] = set()
        """(fold count, from island, to island) of the island migrations recorded (record_migrations)."""

    # -- operations -------------------------------------------------------------------------
    def seed(self, art: Artifact, feedback: Mapping[str, str] | None = None) -> Artifact:
        """The run's first artifact (pool version 1)."""
        ctx = self.ctx
        if self.seed_meta:
            art = replace(art, meta={**art.meta, **self.seed_meta})
        change = ctx.pool.add(art, {"seed": True})
        stored = ctx.pool.get(art.artifact_id)
        self._persist(stored, [], feedback or {}, "seed", lineage=True)
        self._pool_event(change)
        ctx.seed_id = stored.artifact_id
        ctx.best_history.append((ctx.elapsed(), stored.val_mean))
        return stored

    def commit(self, item: WorkItem, art: Artifact, feedback: Mapping[str, str] | None = None) -> Artifact:
        """A fully validated artifact of `item` enters the pool and is announced as accepted."""
        ctx = self.ctx
        before = self.best()
        # metric_calls: the spend when the child was found (GEPAResult.discovery_eval_counts, evotui/library/result.py).
        change = ctx.pool.add(art, {"parent": item.parent_id, "val_mean": art.val_mean, "item_id": item.item_id,
                                    "metric_calls": ctx.tally.metric_calls})
        stored = ctx.pool.get(art.artifact_id)
        self._persist(stored, item.minibatch, feedback or {}, _operator(item), lineage=True)
        self._pool_event(change)
        self._accept(item, stored, before)
        return stored

    def add_external(self, art: Artifact, operator: str, detail: Mapping[str, object]) -> Artifact:
        """An artifact made outside the pipeline (`evotui tune --add`): it enters the pool with its
        lineage rows labelled `operator`; no item, no counters, no bus event."""
        ctx = self.ctx
        change = ctx.pool.add(art, {**detail, "operator": operator})
        stored = ctx.pool.get(art.artifact_id)
        self._persist(stored, [], {}, operator, lineage=True)
        self._pool_event(change)
        return stored

    def insert_speculative(self, item: WorkItem, art: Artifact, partial: float, threshold: float) -> PoolChange:
        """An artifact scored on a validation prefix only: selectable as a parent, never best."""
        ctx = self.ctx
        change = ctx.pool.add(art, {"speculative": True, "partial": partial, "threshold": threshold})
        # Lineage says "mutate" even for a merge: the rows the speculative path always wrote.
        self._persist(ctx.pool.get(art.artifact_id), item.minibatch, {}, "mutate", lineage=True)
        self._pool_event(change)
        ctx.tally.speculative_inserted += 1
        return change

    def confirm(self, item: WorkItem, artifact_id: str, val_scores: Mapping[str, float], mean: float,
                threshold: float, feedback: Mapping[str, str] | None = None,
                meta: Mapping[str, object] | None = None) -> Artifact:
        """Full validation confirmed a speculative artifact: it is now validated and accepted
        (`meta`: what the artifact's meta gains, e.g. a program's metrics)."""
        ctx = self.ctx
        before = self.best()
        change = ctx.pool.set_status(artifact_id, "confirmed", val_scores, {"val_mean": mean, "threshold": threshold,
                                                                            "metric_calls": ctx.tally.metric_calls},
                                     meta)
        stored = ctx.pool.get(artifact_id)
        # Lineage rows were written at the insert; only the scores and status change.
        self._persist(stored, item.minibatch, feedback or {}, _operator(item), lineage=False)
        self._pool_event(change)
        ctx.tally.speculative_confirmed += 1
        self._accept(item, stored, before)
        return stored

    def remove(self, item: WorkItem, artifact_id: str, detail: Mapping[str, object]) -> Artifact:
        """A speculative artifact leaves the pool (it stays readable for lineage)."""
        ctx = self.ctx
        change = ctx.pool.set_status(artifact_id, "removed", None, detail)
        stored = ctx.pool.get(artifact_id)
        self._persist(stored, item.minibatch, {}, _operator(item), lineage=False)
        self._pool_event(change)
        ctx.tally.speculative_removed += 1
        return stored

    def restore(self, artifact_id: str, reason: str, by: str = "engine", previous_id: str | None = None) -> PoolChange:
        """Make an earlier validated artifact the run's active best again (see the docstring);
        `by` (who asked: "cli", "control", ...) goes into the audit row with the reason.
        `previous_id`: the artifact that was active before the operation that asked for the
        restore (a hot-swap commits its edit first); default the active best now."""
        ctx = self.ctx
        art = ctx.pool.get(artifact_id)
        if not is_confirmed(art):
            raise PoolError(f"artifact {artifact_id!r} is {art.status}: only a validated one can be restored")
        previous = ctx.pool.get(previous_id) if previous_id is not None else self.best()
        detail = {RESTORE: True, "reason": reason, "previous_best": previous.artifact_id if previous else None,
                  "by": by}
        # Same status and scores: the artifact is unchanged, so its row is not rewritten.
        change = ctx.pool.set_status(artifact_id, art.status, None, detail)
        self._pool_event(change, kind=RESTORE)
        ctx.bus.publish(ev.BestRestored(artifact_id=artifact_id, previous_id=detail["previous_best"],
                                        val_mean=art.val_mean, pool_version=change.version, reason=reason))
        return change

    def roll_back(self, artifact_id: str, detail: Mapping[str, object]) -> PoolChange:
        """A validated artifact committed after a restored one leaves the search (status
        rolled_back: no longer selectable nor the best); its row keeps everything but the status."""
        return self._restatus(artifact_id, ROLLED_BACK, detail)

    def reinstate(self, artifact_id: str, detail: Mapping[str, object]) -> PoolChange:
        """A rolled-back artifact is confirmed again (a restore to it or to a later one)."""
        return self._restatus(artifact_id, "confirmed", detail)

    def _restatus(self, artifact_id: str, status: str, detail: Mapping[str, object]) -> PoolChange:
        ctx = self.ctx
        change = ctx.pool.set_status(artifact_id, status, None, detail)
        ctx.store.set_artifact_status(ctx.run_id, artifact_id, status)
        self._pool_event(change)
        return change

    def commit_edit(self, art: Artifact, feedback: Mapping[str, str], detail: Mapping[str, object]) -> Artifact:
        """A fully validated human edit of an artifact (a hot-swap, engine/components/hot_swap.py) enters the
        pool like any commit: it bumps the version (stale items see it in the changelog), its
        lineage operator is "edit" and its pool_events row carries `detail` (who, why, which
        component). It is no proposal: no counter moves and no CandidateAccepted is published."""
        ctx = self.ctx
        change = ctx.pool.add(art, {"parent": art.parent_ids[0] if art.parent_ids else None, "val_mean": art.val_mean,
                                    "edit": True, **detail})
        stored = ctx.pool.get(art.artifact_id)
        self._persist(stored, [], feedback, "edit", lineage=True)
        self._pool_event(change)
        if stored.val_mean > max((a.val_mean for a in ctx.pool.confirmed() if a is not stored), default=float("-inf")):
            ctx.best_history.append((ctx.elapsed(), stored.val_mean))
        return stored

    # -- reads --------------------------------------------------------------------------------
    def best(self) -> Artifact | None:
        """The run's active best (`Pool.best()` follows restores)."""
        return self.ctx.pool.best()

    def last_restore(self) -> PoolChange | None:
        """The newest restore change (kind "restore"), if any; it survives a resume."""
        return self.ctx.pool.restored

    # -- steps ----------------------------------------------------------------------------------
    def _persist(self, art: Artifact, minibatch: Sequence[str], feedback: Mapping[str, str], operator: str,
                 lineage: bool) -> None:
        ctx, now = self.ctx, time.time()
        ctx.store.upsert_artifact(ctx.run_id, artifact_id=art.artifact_id, text=art.text, status=art.status,
                                  parent_ids=list(art.parent_ids), created_version=art.created_version,
                                  val_mean=art.val_mean, val_scores=dict(art.val_scores), minibatch=list(minibatch),
                                  created_at=art.created_at, meta=dict(art.meta),
                                  components=components.to_json(art.components))
        for parent in art.parent_ids if lineage else ():
            ctx.store.insert_lineage(ctx.run_id, parent, art.artifact_id, operator, now)
        ctx.store.insert_evaluations(ctx.run_id, art.artifact_id, self.rows(art, feedback), now)

    def _pool_event(self, change: PoolChange, kind: str | None = None) -> None:
        ctx = self.ctx
        ctx.store.insert_pool_event(ctx.run_id, change.version, kind or change.kind, change.artifact_id,
                                    dict(change.detail), time.time())
        self.record_migrations()

    def record_migrations(self) -> None:
        """Island migrations the pool's island fold (engine/selection/islands.py) has made and this
        ledger has not recorded: a migrations row each (schema v9), right after the pool_events
        row of the commit that set them off, and an IslandsMigrated event for those of this
        commit. A resumed run's rebuilt fold offers the earlier ones again; their rows are kept
        once (INSERT OR IGNORE, keyed by run, fold count and islands) and no event is repeated."""
        ctx = self.ctx
        for index in ctx.pool.indexes():
            log = getattr(index, "migration_log", None)
            if log is None:
                continue
            settings = index.settings  # type: ignore[attr-defined]  # an IslandArchive's IslandSettings
            threshold = settings.migration_threshold if settings.migration_trigger == "diversity" else None
            for m in log():
                if (m.at, m.source, m.target) in self._migrated:
                    continue
                self._migrated.add((m.at, m.source, m.target))
                ctx.store.insert_migration(ctx.run_id, {
                    "pool_version": m.version, "at_commit": m.at, "from_island": m.source, "to_island": m.target,
                    "artifact_ids": list(m.artifact_ids), "trigger": settings.migration_trigger,
                    "from_diversity": m.source_diversity, "to_diversity": m.target_diversity,
                    "threshold": threshold, "interval": settings.migration_interval, "created_at": time.time()})
                if m.version >= ctx.pool.version:
                    ctx.bus.publish(ev.IslandsMigrated(
                        from_island=m.source, to_island=m.target, artifact_ids=tuple(m.artifact_ids),
                        pool_version=m.version, trigger=settings.migration_trigger, from_diversity=m.source_diversity,
                        to_diversity=m.target_diversity, threshold=threshold))

    def _accept(self, item: WorkItem, stored: Artifact, before: Artifact | None) -> None:
        ctx = self.ctx
        ctx.tally.accepted += 1
        ctx.merges.count_accepted(item.is_merge, ctx.tally)
        is_best = before is None or stored.val_mean > before.val_mean
        if is_best:
            ctx.best_history.append((ctx.elapsed(), stored.val_mean))
        ctx.bus.publish(ev.CandidateAccepted(item_id=item.item_id, artifact_id=stored.artifact_id,
                                             parent_id=item.parent_id, val_mean=stored.val_mean,
                                             pool_version=ctx.pool.version, best=is_best))


def _operator(item: WorkItem) -> str:
    return "merge" if item.is_merge else "mutate"
