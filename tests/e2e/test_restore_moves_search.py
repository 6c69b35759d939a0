"""A restore moves the search (issue 36, Autogenesis's rollback), read from the stored rows.

`evotui restore RUN comp@VER` rolls back every validated artifact committed after the one that
introduced that version (status rolled_back, one pool_events row each naming the restore), the
versions stay listed and marked; after `evotui resume`, no new item takes a rolled-back artifact
as its parent, so parents come from the restored state; a later restore of a rolled-back artifact
confirms it again.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, read_rows, summary_of


def _statuses(db: Path, run_id: str) -> dict[str, tuple[str, int]]:
    return {aid: (status, version) for aid, status, version in
            read_rows(db, "SELECT artifact_id, status, created_version FROM artifacts WHERE run_id = ?", run_id)}


def test_restore_rolls_back_later_commits_and_resume_picks_parents_from_the_restored_state(db: Path) -> None:
    res = evotui("run", "agent_tools", "--no-ui", "--mode", "sync", "--strategy", "sepl", "--seed", "5",
                 "--db", str(db), "--max-proposals", "14", *FAST)
    assert res.returncode == 0, res.stderr[-2000:]
    run_id = summary_of(res)["run_id"]
    info = json.loads(evotui("components", run_id, "--db", str(db), "--json").stdout)
    before = _statuses(db, run_id)
    committed = sorted((v, aid) for aid, (status, v) in before.items() if status == "confirmed")
    assert len(committed) >= 3, committed
    # The target: a version introduced by an early commit, with later commits after it.
    versions = [(n, v) for n, c in info["components"].items() for v in c["versions"] if v["artifact_id"] != "a000000"]
    name, target = min(versions, key=lambda nv: before[nv[1]["artifact_id"]][1])
    cut = before[target["artifact_id"]][1]
    later = {aid for v, aid in committed if v > cut}
    assert later

    out = evotui("restore", run_id, f"{name}@{target['version']}", "--reason", "regression", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert f"rolled back {len(later)} committed after it" in out.stdout
    [(restore_version, detail)] = read_rows(db, "SELECT version, detail_json FROM pool_events WHERE run_id = ? AND "
                                            "kind = 'restore'", run_id)
    assert json.loads(detail)["reason"] == "regression"
    after = _statuses(db, run_id)
    assert {aid for aid, (status, _) in after.items() if status == "rolled_back"} == later
    events = read_rows(db, "SELECT artifact_id, detail_json FROM pool_events WHERE run_id = ? AND kind = 'rolled_back'",
                       run_id)
    assert {aid for aid, _ in events} == later
    assert all(json.loads(d)["restore_version"] == restore_version and json.loads(d)["restore_of"]
               == target["artifact_id"] for _, d in events)
    # The versions stay (immutable), the rolled-back ones marked.
    listed = evotui("components", run_id, name, "--db", str(db)).stdout
    assert f"{name}@{target['version']}" in listed
    marked = [ln for ln in listed.splitlines() if "(rolled back)" in ln]
    assert all(any(aid in ln for aid in later) for ln in marked)
    again = json.loads(evotui("components", run_id, "--db", str(db), "--json").stdout)
    assert {(n, v["version"]) for n, c in again["components"].items() for v in c["versions"]} == \
        {(n, v["version"]) for n, c in info["components"].items() for v in c["versions"]}

    res = evotui("resume", run_id, "--no-ui", "--db", str(db), "--max-proposals", "24", "--quiet")
    assert res.returncode == 0, res.stderr[-2000:]
    new_items = read_rows(db, "SELECT item_id, parent_artifact_id FROM items WHERE run_id = ? AND created_version > ?",
                          run_id, restore_version)
    assert len(new_items) >= 5, new_items
    parents = [p for _, p in new_items if p]
    print(f"restored {target['artifact_id']} ({name}@{target['version']}), rolled back {sorted(later)}; "
          f"parents after resume: {parents}")
    assert not set(parents) & later, "a rolled-back artifact was picked as a parent"
    restored_state = {aid for aid, (status, v) in after.items() if v <= cut and status in ("seed", "confirmed")}
    assert set(parents) <= restored_state | {aid for aid, (_, v) in _statuses(db, run_id).items() if v > restore_version}

    # Restoring a rolled-back artifact confirms it again (and rolls back what came after it).
    back = min(later, key=lambda aid: before[aid][1])
    out = evotui("restore", run_id, back, "--reason", "undo", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert f"reinstated {back}" in out.stdout and _statuses(db, run_id)[back][0] == "confirmed"
