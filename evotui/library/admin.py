"""Python API of a stored run's components (issue 15): restore an artifact or a component
version, read the versions, hot-swap a component of a live run. Bad input raises ValueError with
the reason (the CLI's `evotui restore / components / edit` print the same reason and exit 2).

    evotui.restore(run_id, "system@1.0.3", db="evotui.db", reason="...")
    evotui.component_versions(run_id, db="evotui.db")
    evotui.edit_component(run_id, "system", "new text", db="evotui.db", reason="...")
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from engine.run.admin import (AdminError, RestoreResult, check_restorable, find_artifact, resolve_target,
                              restore_offline, run_versions)


async def restore_async(run_id: str, target: str, *, db: str | Path = "evotui.db", reason: str = "",
                        by: str = "python") -> RestoreResult:
    """Make an artifact (or the artifact that introduced a component version NAME@X.Y.Z) the run's
    active best through the ledger: through the live driver's control socket when a process
    drives the run, else offline. AdminError (a ValueError in `restore`) when refused."""
    from evotui.control import ControlClient, ControlError, socket_path

    db = Path(db)
    artifact_id = await resolve_target(db, run_id, target)
    found = await find_artifact(db, run_id, artifact_id, writable=True)
    check_restorable(found)
    if found.run["status"] != "running":  # a dead driver reads as interrupted
        return await restore_offline(db, run_id, artifact_id, reason, by=by)
    path = socket_path(db, run_id)
    client = ControlClient(path)
    if not await client.connect():
        raise AdminError(f"run {run_id} is driven by a live process that serves no control socket at {path}; "
                         f"restore from its TUI, or stop that process and run this again")
    try:
        reply = await client.request("restore", artifact_id=artifact_id, reason=reason)
    except ControlError as exc:
        raise AdminError(f"the driver of run {run_id} refused the restore: {exc}") from None
    finally:
        await client.close()
    return RestoreResult(**reply)


async def versions_async(run_id: str, *, db: str | Path = "evotui.db", component: str | None = None) -> dict:
    """{"run_id", "active_artifact", "components": {name: {"active": version, "versions": [...]}}}."""
    versions = await run_versions(Path(db), run_id)
    history = versions.index.history
    if not history:
        raise AdminError(f"run {run_id} has no committed artifact yet")
    if component is not None and component not in history:
        raise AdminError(f"run {run_id} has no component {component!r} (its components: {', '.join(history)})")
    active = versions.index.of_artifact(versions.active_id) if versions.active_id else {}
    names = [component] if component else list(history)
    return {"run_id": run_id, "active_artifact": versions.active_id,
            "components": {n: {"active": active[n].version if n in active else None,
                               "versions": [v.to_dict() for v in history[n]]} for n in names}}


async def edit_async(run_id: str, component: str, text: str, *, db: str | Path = "evotui.db",
                     reason: str = "") -> dict:
    """Hot-swap `component` of the live run's active artifact (engine/components/hot_swap.py) through its
    control socket; the reply names the new artifact and version."""
    from engine.run.admin import _open_readonly
    from evotui.control import ControlClient, ControlError, socket_path

    db = Path(db)
    store = await _open_readonly(db)
    try:
        runs = await store.fetch_rows("runs", run_id)
    finally:
        await store.close()
    if not runs:
        raise AdminError(f"no run {run_id!r} in {db}; list runs with `evotui runs --db {db}`")
    if runs[0].get("status") != "running":
        raise AdminError(f"run {run_id} is {runs[0].get('status')}: a hot-swap edits a live run (resume it, "
                         f"or restore a version with `evotui restore {run_id} NAME@X.Y.Z`)")
    path = socket_path(db, run_id)
    client = ControlClient(path)
    if not await client.connect():
        raise AdminError(f"run {run_id} serves no control socket at {path}")
    try:
        return await client.request("edit_component", reply_timeout_s=600.0, component=component, text=text,
                                    reason=reason)
    except ControlError as exc:
        raise AdminError(f"the driver of run {run_id} refused the edit: {exc}") from None
    finally:
        await client.close()


def _sync(coro):
    try:
        return asyncio.run(coro)
    except AdminError as exc:
        raise ValueError(str(exc)) from None


def restore(run_id: str, target: str, *, db: str | Path = "evotui.db", reason: str = "") -> dict:
    """See restore_async; returns the restore result as a dict; ValueError when refused."""
    return dataclasses.asdict(_sync(restore_async(run_id, target, db=db, reason=reason)))


def component_versions(run_id: str, *, db: str | Path = "evotui.db", component: str | None = None) -> dict:
    """See versions_async; ValueError for an unknown run or component."""
    return _sync(versions_async(run_id, db=db, component=component))


def edit_component(run_id: str, component: str, text: str, *, db: str | Path = "evotui.db", reason: str = "") -> dict:
    """See edit_async; ValueError when refused (a frozen component, a run that is not live, ...)."""
    return _sync(edit_async(run_id, component, text, db=db, reason=reason))
