"""Administrative operations on a stored run that do not run its pipeline: restore an earlier
best (`evotui restore`), and the source of a branch and the new run it starts (`evotui branch`).

Every check reads the database read-only first, so a refused request writes nothing. The
writes themselves go through the ledger (the only writer of the pool): a restore row says who
asked ({"by": "cli" | "control"}), a branch's seed records the artifact it came from.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from engine.config import ConfigError, build_config
from engine.ledger import Ledger
from engine.pool import ROLLED_BACK, Artifact, PoolChange, PoolError, is_confirmed
from engine.run.state import artifact_from_row
from engine.store.store import Store, StoreError
from engine.tasks.loader import load_any_task, with_program_settings
from engine.tasks.prompt_task import TaskError
from engine.trace.importer import IMPORTED_STATUS


class AdminError(Exception):
    """A refused request; the message is one line naming the problem and the fix."""


@dataclass(frozen=True)
class RestoreResult:
    run_id: str
    artifact_id: str
    previous_id: str | None
    val_mean: float
    pool_version: int
    by: str
    rolled_back: tuple[str, ...] = ()
    """Validated artifacts committed after the restored one: they left the search."""
    reinstated: tuple[str, ...] = ()
    """Artifacts an earlier restore had rolled back that the restored state holds again."""

    def line(self) -> str:
        moved = ""
        if self.rolled_back:
            moved += f"; rolled back {len(self.rolled_back)} committed after it ({_ids(self.rolled_back)})"
        if self.reinstated:
            moved += f"; reinstated {_ids(self.reinstated)}"
        return (f"run {self.run_id}: active best is now {self.artifact_id} (val {self.val_mean:.3f}), "
                f"was {self.previous_id or '-'}; pool version {self.pool_version}{moved}")


def _ids(ids: tuple[str, ...], shown: int = 6) -> str:
    return ", ".join(ids[:shown]) + (f", ... {len(ids) - shown} more" if len(ids) > shown else "")


def restore_result(run_id: str, change: PoolChange, val_mean: float, by: str,
                   rolled_back: tuple[str, ...] = (), reinstated: tuple[str, ...] = ()) -> RestoreResult:
    previous = change.detail.get("previous_best")
    return RestoreResult(run_id=run_id, artifact_id=change.artifact_id,
                         previous_id=str(previous) if previous else None, val_mean=val_mean,
                         pool_version=change.version, by=by, rolled_back=rolled_back, reinstated=reinstated)


def restore_with(ledger: Ledger, artifact_id: str, reason: str, by: str) -> RestoreResult:
    """Restore through the run's ledger (on the driving loop); AdminError for an artifact the
    pool does not hold or that is not fully validated.

    A restore moves the search back (Autogenesis's rollback): the population becomes the one
    the run had right after the restored artifact was committed. Every validated artifact
    committed after it is rolled back (kept, with its versions and lineage, but no longer a
    parent, an inspiration or the best), and an artifact an earlier restore rolled back that
    was committed no later than it is confirmed again. Speculative artifacts still being
    validated are left to their validation."""
    pool = ledger.ctx.pool
    try:
        target = pool.get(artifact_id)
    except PoolError as exc:
        raise AdminError(str(exc)) from None
    previous = ledger.best()
    cut = target.created_version
    back = sorted((a for a in pool.artifacts() if a.status == ROLLED_BACK and a.created_version <= cut),
                  key=lambda a: (a.created_version, a.artifact_id))
    if target.status != ROLLED_BACK and not is_confirmed(target):
        raise AdminError(f"artifact {artifact_id!r} is {target.status}: only a validated one can be restored")
    why = {"restore_of": artifact_id, "reason": reason, "by": by}
    for art in back:
        ledger.reinstate(art.artifact_id, {"reinstated": True, **why})
    try:
        change = ledger.restore(artifact_id, reason, by=by,
                                previous_id=previous.artifact_id if previous is not None else None)
    except PoolError as exc:
        raise AdminError(str(exc)) from None
    later = sorted((a for a in pool.confirmed() if a.created_version > cut and a.created_version < change.version
                    and a.status != "seed"), key=lambda a: (a.created_version, a.artifact_id))
    for art in later:
        ledger.roll_back(art.artifact_id, {"rolled_back": True, "restore_version": change.version, **why})
    return restore_result(ledger.ctx.run_id, change, pool.get(artifact_id).val_mean, by,
                          tuple(a.artifact_id for a in later), tuple(a.artifact_id for a in back))


# -- read-only checks ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredArtifact:
    """What a check found: the run's row and one of its artifacts."""
    run: Mapping[str, Any]
    artifact: Artifact


async def _open_readonly(db: Path) -> Store:
    if not Path(db).expanduser().exists():
        raise AdminError(f"no database at {db}; pass --db PATH (runs are stored where `run --db` put them)")
    try:
        return await Store.open(db, create=False, readonly=True)
    except StoreError as exc:
        raise AdminError(str(exc)) from None


async def find_artifact(db: Path, run_id: str, artifact_id: str, *, writable: bool) -> StoredArtifact:
    """The run's row and artifact, or AdminError: unknown run, unknown artifact, an artifact of
    another run, a run that is imported (when `writable`)."""
    store = await _open_readonly(db)
    try:
        runs = await store.fetch_rows("runs", run_id)
        if not runs:
            raise AdminError(f"no run {run_id!r} in {db}; list runs with `evotui runs --db {db}`")
        run = {**runs[0], "run_id": run_id}
        if writable and run.get("status") == IMPORTED_STATUS:
            raise AdminError(f"run {run_id} is imported from an EvoTrace file and read-only; branch it with "
                             f"`evotui branch {run_id} ARTIFACT --db {db}` instead")
        rows = {r["artifact_id"]: r for r in await store.fetch_rows("artifacts", run_id)}
        if artifact_id not in rows:
            raise AdminError(await _not_found(store, db, run_id, artifact_id))
        return StoredArtifact(run=run, artifact=artifact_from_row(rows[artifact_id]))
    finally:
        await store.close()


async def _not_found(store: Store, db: Path, run_id: str, artifact_id: str) -> str:
    for other in await store.list_runs():
        if other["run_id"] != run_id and any(r["artifact_id"] == artifact_id
                                             for r in await store.fetch_rows("artifacts", other["run_id"])):
            return f"artifact {artifact_id} belongs to run {other['run_id']}, not to run {run_id}"
    return f"run {run_id} has no artifact {artifact_id!r}; see `evotui show {run_id} --db {db}`"


def check_restorable(found: StoredArtifact) -> None:
    art = found.artifact
    if not is_confirmed(art) and art.status != ROLLED_BACK:
        raise AdminError(f"artifact {art.artifact_id} is {art.status}: only a fully validated one (seed, "
                         "confirmed or rolled back by an earlier restore) can be restored")


# -- restore without a driver ------------------------------------------------------------------
async def restore_offline(db: Path, run_id: str, artifact_id: str, reason: str, by: str = "cli") -> RestoreResult:
    """Open the run under its lease (the pool rebuilt from its rows), restore through the
    ledger, save, close: the pipeline never runs. The run keeps the status it had."""
    from engine.run.runner import EngineRun, SetupError

    found = await find_artifact(db, run_id, artifact_id, writable=True)
    check_restorable(found)
    try:
        run = await EngineRun.resume(db, run_id, {}, {})
    except SetupError as exc:
        raise AdminError(str(exc)) from None
    try:
        result = restore_with(run.ctx.ledger, artifact_id, reason, by)
        run.orchestrator.recorder.save_run_state()
        # resume() marked the run running; it is not, so it keeps the status it had. Its stored
        # summary (written when it last stopped; `evotui runs` reads it) names the new best.
        summary = found.run.get("summary")
        if isinstance(summary, dict):
            summary = {**summary, "best_id": result.artifact_id, "best_score": result.val_mean,
                       "pool_version": result.pool_version}
        run.ctx.store.update_run(run_id, status=found.run["status"], summary_json=summary, updated_at=time.time())
        await run.ctx.store.flush()
    finally:
        await run.close()
    return result


# -- branch ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BranchSource:
    """The run and artifact a branch starts from."""
    run_id: str
    task_path: str
    config: Mapping[str, Any]
    artifact: Artifact

    @property
    def link(self) -> dict[str, str]:
        return {"run_id": self.run_id, "artifact_id": self.artifact.artifact_id}

    def seeded(self, task: Any) -> Any:
        """A copy of the task whose seed is the artifact (its text, and its components)."""
        if task.kind == "program":
            return dataclasses.replace(task, initial_program=self.artifact.text)
        if task.kind != "prompt":
            raise AdminError(f"run {self.run_id} is a {task.kind} task run (started from Python); branch it "
                             "from Python with the artifact's candidate as the seed")
        return dataclasses.replace(task, seed_prompt=self.artifact.text, seed_components=self.artifact.components)


async def branch_source(db: Path, run_id: str, artifact_id: str, task: str | None = None) -> BranchSource:
    """Any artifact of a run can start a branch except a removed one (it left the pool); a
    component version NAME@X.Y.Z names the artifact that introduced it. `task` (a folder or
    built-in name) replaces the run's task folder: an imported run may record none."""
    artifact_id = await resolve_target(db, run_id, artifact_id)
    found = await find_artifact(db, run_id, artifact_id, writable=False)
    if found.artifact.status == "removed":
        raise AdminError(f"artifact {artifact_id} was removed from run {run_id}'s pool; branch from a validated one")
    task_path = _task_folder(task) if task else found.run["task_path"]
    if not task_path:
        raise AdminError(f"run {run_id} records no task folder (an import of another tool's run); name the task "
                         f"the run evolved: `evotui branch {run_id} {artifact_id} --task TASK_FOLDER --no-ui`")
    return BranchSource(run_id=run_id, task_path=str(task_path), config=found.run["config"] or {},
                        artifact=found.artifact)


async def start_branch(source: BranchSource, layers: list[tuple[str, dict]], db_path: Path):
    """A new run seeded with the source's artifact (`evotui branch`): the source run's task and
    stored config under `layers`, the task's seed replaced by the artifact, whose seed row records
    where it came from. SetupError (engine/run/setup.py) when it cannot start."""
    from engine.run.runner import EngineRun, SetupError  # the engine, on use: checks of a stored run need none

    try:
        task = load_any_task(source.task_path)
        # An imported run stores no evotui config: the task's defaults stand in for it.
        stored = ((f"stored config of run {source.run_id}", source.config) if source.config
                  else ("defaults of the task", task.defaults))
        config = build_config([stored, *layers])
        task = source.seeded(with_program_settings(task, config.program))
    except (TaskError, ConfigError, AdminError) as exc:
        raise SetupError(f"cannot branch {source.run_id}: {exc}") from None
    return await EngineRun.start_new(config, task, db_path, source.task_path,
                                     seed_meta={"branched_from": dict(source.link)})


def _task_folder(task: str) -> str:
    from engine.tasks.program_task import detect_format
    from engine.tasks.prompt_task import TaskError, resolve_task_path

    try:
        return str(resolve_task_path(task, detect_format))
    except TaskError as exc:
        raise AdminError(f"--task: {exc}") from None


# -- component versions (engine/components/versions.py) -------------------------------------------
@dataclass(frozen=True)
class RunVersions:
    """A stored run's component versions and the artifact that is active (Pool.best, restores
    followed)."""
    run_id: str
    index: Any
    active_id: str | None


async def run_versions(db: Path, run_id: str) -> RunVersions:
    """Read-only: the versions of every component of a run, rebuilt from its committed rows."""
    from engine.components.versions import VersionIndex, rollback_versions
    from engine.pool import Pool
    from engine.run.state import change_from_row

    store = await _open_readonly(db)
    try:
        if not await store.fetch_rows("runs", run_id):
            raise AdminError(f"no run {run_id!r} in {db}; list runs with `evotui runs --db {db}`")
        arts = [artifact_from_row(r) for r in await store.fetch_rows("artifacts", run_id)]
        changes = [change_from_row(r) for r in await store.fetch_rows("pool_events", run_id)]
    finally:
        await store.close()
    pool = Pool()
    try:
        pool.restore(arts, changes)
    except PoolError as exc:
        raise AdminError(f"run {run_id}: {exc}") from None
    best = pool.best()
    return RunVersions(run_id, VersionIndex(arts, rollback_versions(changes)), best.artifact_id if best else None)


async def resolve_target(db: Path, run_id: str, target: str) -> str:
    """The artifact id `target` names: an artifact id as it is, or a component version
    NAME@X.Y.Z of this run (the committed artifact that introduced it)."""
    from engine.components.versions import parse_spec

    spec = parse_spec(target)
    if spec is None:
        return target
    versions = await run_versions(db, run_id)
    found = versions.index.find(*spec)
    if found is not None:
        return found.artifact_id
    known = versions.index.history.get(spec[0])
    elsewhere = await _version_elsewhere(db, run_id, spec)
    if elsewhere:
        raise AdminError(f"version {target} belongs to run {elsewhere}, not to run {run_id} (versions are numbered "
                         f"per run; branch that run with `evotui branch {elsewhere} {target} --db {db}`)")
    if known is None:
        names = ", ".join(sorted(versions.index.history)) or "none"
        raise AdminError(f"run {run_id} has no component {spec[0]!r} (its components: {names})")
    raise AdminError(f"run {run_id} has no version {target} (versions of {spec[0]}: {known[0].version} to "
                     f"{known[-1].version}); a version belongs to its own run, see `evotui components {run_id} "
                     f"{spec[0]} --db {db}`")


async def _version_elsewhere(db: Path, run_id: str, spec: tuple[str, str]) -> str | None:
    """The first other run of the database that has version `spec`, if any."""
    store = await _open_readonly(db)
    try:
        others = [r["run_id"] for r in await store.list_runs() if r["run_id"] != run_id]
    finally:
        await store.close()
    for other in others:
        if (await run_versions(db, other)).index.find(*spec) is not None:
            return other
    return None
