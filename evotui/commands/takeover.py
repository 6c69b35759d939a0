"""Before `evotui resume`: a run whose driver on this host is stuck (a lost terminal wedged it,
a stopped job) would otherwise stay locked for as long as that pid lives.

The rule (engine.store.lease.stuck): the holder's heartbeat is older than STUCK_AFTER_S and it
does not answer a ping on its control socket. Without --take-over, resume refuses with a message
naming the pid and the flag; with it, the stuck process is killed first (it must not wake up and
write a run another process drives), then resume takes the lease of a dead holder as usual.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from engine.run.runner import SetupError
from engine.store import lease as leases
from engine.store.store import Store, StoreError
from evotui.control import answers, socket_path


async def _holder(db: Path, run_id: str | None) -> tuple[str, leases.Lease | None]:
    try:
        store = await Store.open(db, create=False, readonly=True)
    except StoreError:
        return run_id or "", None  # resume itself reports a missing or foreign database
    try:
        run_id = run_id or await store.latest_run_id()
        return run_id or "", (await store.read_lease(run_id) if run_id else None)
    finally:
        await store.close()


async def clear_stuck_driver(db: Path, run_id: str | None, take_over: bool) -> str:
    """Refuse (SetupError) or, with take_over, kill a stuck driver of the run. Returns the line to
    tell the user ('' when nothing was done); a run with no live holder is left to resume."""
    run_id, holder = await _holder(db, run_id)
    if holder is None or not leases.holder_alive(holder):
        return ""
    now = time.time()
    silent = not await answers(socket_path(db, run_id))
    if not leases.stuck(holder, now, answers_control=not silent):
        if take_over:
            why = "it answers its control socket" if not silent else "its heartbeat is recent"
            raise SetupError(f"--take-over: run {run_id} is driven by {holder.describe(now)}, which is not stuck "
                             f"({why}); watch or steer it with `evotui attach {run_id} --db {db}`, or stop it first")
        return ""  # resume's own lease check refuses with the usual message
    if not take_over:
        raise SetupError(f"run {run_id} is driven by {holder.describe(now)}, which does not answer its control "
                         f"socket: it looks stuck. `evotui resume {run_id} --db {db} --take-over` kills pid "
                         f"{holder.pid} and continues the run")
    problem = await asyncio.to_thread(leases.kill_holder, holder)
    if problem:
        raise SetupError(f"cannot take run {run_id} over: {problem}")
    socket_path(db, run_id).unlink(missing_ok=True)
    return (f"evotui: run {run_id} was driven by {holder.describe(now)}, stuck (no answer on its control "
            f"socket); killed pid {holder.pid} and taking the run over")
