"""The run's side of the driver lease (engine/store/lease.py) and what a driver does when its
database fails: heartbeat, release, the last-ditch status mark, no empty files left behind."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from engine import events as ev
from engine.context import FatalRunError
from engine.store.lease import HEARTBEAT_S, Lease
from engine.store.store import Store, StoreError


async def keep_lease(run) -> None:
    """Keep the lease fresh; a lease taken over (by a process that judged us dead) stops us."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        if run.lease is None:
            return
        try:
            ours = await run.ctx.store.renew_lease(run.lease)
        except sqlite3.Error as exc:
            # A busy or full disk delays the heartbeat; the writer reports real failures.
            run.ctx.bus.publish(ev.Notice(level="warning", message=f"lease heartbeat failed: {exc}"))
            continue
        if not ours:
            run.lease = None
            run.orchestrator.fail(FatalRunError(
                f"another process took over run {run.ctx.run_id}; this one stops", exit_code=2))
            return


async def release_quietly(store: Store, held: Lease) -> str:
    """Release the lease; if the database cannot take the write (full disk), the lease stays and
    the next driver takes it over once it sees this process has gone. Returns the problem or ''."""
    try:
        if store.closed:
            reopened = await Store.open(store.path, create=False)
            try:
                await reopened.release_lease(held)
            finally:
                await reopened.close()
        else:
            await store.release_lease(held)
    except (StoreError, sqlite3.Error) as exc:
        return f"could not release the run's lease ({exc}); the next resume takes it over"
    return ""


async def mark_interrupted(db_path: Path, run_id: str, warnings: list[str]) -> None:
    """After a writer failure: one direct attempt to mark the run interrupted. If the disk is still
    full this fails too; `runs`/`show`/`attach` then read 'running' with a dead lease as interrupted."""
    try:
        store = await Store.open(db_path, create=False)
        try:
            store.update_run(run_id, status="interrupted", updated_at=time.time())
        finally:
            await store.close()
    except StoreError as exc:
        warnings.append(f"could not mark run {run_id} interrupted ({exc}); it resumes all the same")


def abandon(db_path: Path, held: Lease, timeout_s: float = 2.0) -> str:
    """The last-ditch bookkeeping of a process about to exit without finishing its run (a front
    end's watchdog thread, when the event loop cannot finish the drain): mark the run interrupted
    and release the lease, in one transaction and only while the lease is still ours, so a run that
    did end (completed, already marked) is left as it is. Synchronous, on its own connection: the
    loop and its store may be stuck. Returns the problem, or ''."""
    try:
        con = sqlite3.connect(str(db_path), timeout=timeout_s, isolation_level=None)
    except sqlite3.Error as exc:
        return f"cannot open {db_path} to mark run {held.run_id} interrupted ({exc}); it resumes all the same"
    try:
        con.execute("BEGIN IMMEDIATE")
        ours = "EXISTS (SELECT 1 FROM leases WHERE run_id = ? AND token = ?)"
        con.execute(f"UPDATE runs SET status = 'interrupted', updated_at = ? WHERE run_id = ? AND status = 'running' "
                    f"AND {ours}", (time.time(), held.run_id, held.run_id, held.token))
        con.execute("DELETE FROM leases WHERE run_id = ? AND token = ?", (held.run_id, held.token))
        con.execute("COMMIT")
    except sqlite3.Error as exc:
        return f"could not mark run {held.run_id} interrupted ({exc}); it resumes all the same"
    finally:
        con.close()
    return ""


def remove_db_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
