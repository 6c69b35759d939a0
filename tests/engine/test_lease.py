"""The driver lease: one live driver per run; a dead one's lease is taken over."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.store import Store
from engine.store.lease import LEASE_TTL_S, LeaseHeld


async def _store_with_run(path: Path) -> Store:
    store = await Store.open(path, create=True)
    store.insert_run("r1", task="t", task_path=None, config_json={}, seed=0, mode="async", policy="full",
                     backend="sim", status="running", created_at=1.0)
    await store.flush()
    return store


def _set_holder(path: Path, **cols) -> None:
    con = sqlite3.connect(path)
    sets = ", ".join(f"{k} = ?" for k in cols)
    con.execute(f"UPDATE leases SET {sets} WHERE run_id = 'r1'", tuple(cols.values()))
    con.commit()
    con.close()


async def test_a_live_holder_is_refused_and_named(tmp_path: Path) -> None:
    store = await _store_with_run(tmp_path / "l.db")
    held = await store.acquire_lease("r1")
    with pytest.raises(LeaseHeld, match=rf"already driven by pid {os.getpid()} .*evotui attach r1"):
        await store.acquire_lease("r1")
    await store.release_lease(held)
    again = await store.acquire_lease("r1")  # released: free to take
    assert again.token != held.token
    await store.close()


async def test_a_dead_holder_on_this_host_is_taken_over(tmp_path: Path) -> None:
    store = await _store_with_run(tmp_path / "l.db")
    await store.acquire_lease("r1")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _set_holder(tmp_path / "l.db", pid=int(gone.stdout))
    taken = await store.acquire_lease("r1")
    assert taken.pid == os.getpid()
    assert (await store.read_lease("r1")).token == taken.token
    await store.close()


async def test_a_recycled_pid_is_not_mistaken_for_the_holder(tmp_path: Path) -> None:
    store = await _store_with_run(tmp_path / "l.db")
    await store.acquire_lease("r1")
    _set_holder(tmp_path / "l.db", pid_started="1")  # our pid, but a process that started at another time
    await store.acquire_lease("r1")
    await store.close()


async def test_a_holder_on_another_host_counts_while_its_heartbeat_is_fresh(tmp_path: Path) -> None:
    store = await _store_with_run(tmp_path / "l.db")
    held = await store.acquire_lease("r1")
    _set_holder(tmp_path / "l.db", host="elsewhere", heartbeat_at=time.time())
    with pytest.raises(LeaseHeld, match="on elsewhere"):
        await store.acquire_lease("r1")
    _set_holder(tmp_path / "l.db", heartbeat_at=time.time() - LEASE_TTL_S - 1)
    mine = await store.acquire_lease("r1")
    assert not await store.renew_lease(held)  # the old holder learns it lost the lease
    assert await store.renew_lease(mine)
    await store.close()


async def test_a_running_run_without_a_live_driver_reads_as_interrupted(tmp_path: Path) -> None:
    store = await _store_with_run(tmp_path / "l.db")
    assert (await store.list_runs())[0]["status"] == "interrupted"  # nobody holds it
    held = await store.acquire_lease("r1")
    assert (await store.list_runs())[0]["status"] == "running"
    assert (await store.load_run("r1")).status == "running"
    _set_holder(tmp_path / "l.db", pid_started="1")
    assert (await store.load_run("r1")).status == "interrupted"
    await store.release_lease(held)
    await store.close()
