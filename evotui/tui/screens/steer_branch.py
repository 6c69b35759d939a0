"""Branch a new run from a candidate, from the TUI: `evotui branch RUN ID --db DB --no-ui` started
as a process of its own (its own session, so it outlives this view and a hang-up), its output in a
log file beside the database. The new run is an ordinary run: `evotui runs` lists it and
`evotui attach NEW_RUN` watches it. No textual here, so tests call it directly.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

VALIDATED = ("seed", "confirmed")


class BranchError(Exception):
    """Refused before anything started; the message is one line for the user."""


def run_of(backend) -> tuple[str, Path]:
    """(run id, database) of the run a backend shows."""
    run = getattr(backend, "run", None)
    if run is not None:
        return run.ctx.run_id, Path(run.db_path)
    run_id, db = getattr(backend, "run_id", ""), getattr(backend, "db_path", None)
    if not run_id or db is None:
        raise BranchError("this view has no stored run to branch from")
    return str(run_id), Path(db)


def branch_command(run_id: str, db: Path, artifact_id: str) -> list[str]:
    return [sys.executable, "-m", "evotui.cli", "branch", run_id, artifact_id, "--db", str(db), "--no-ui",
            "--progress-every", "10"]


def start_branch(backend, artifact_id: str) -> str:
    """Start the branch; returns the line telling the user where it runs. BranchError if refused."""
    if not artifact_id:
        raise BranchError("name a candidate to branch from (the candidate field; lineage fills it in)")
    known = {a.artifact_id: a for a in backend.artifacts()}
    if artifact_id not in known:
        raise BranchError(f"no candidate {artifact_id!r} in this run (see the lineage screen, key 3)")
    if known[artifact_id].status not in VALIDATED:
        raise BranchError(f"{artifact_id} is {known[artifact_id].status}: branch from a validated candidate")
    run_id, db = run_of(backend)
    log = db.with_name(f"{db.name}.branch-{artifact_id}-{time.strftime('%Y%m%d-%H%M%S')}.log")
    with open(log, "ab") as out:
        proc = subprocess.Popen(branch_command(run_id, db, artifact_id), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return (f"branch of {run_id} from {artifact_id} started (pid {proc.pid}, log {log}); "
            f"`evotui runs --db {db}` lists it, `evotui attach NEW_RUN --db {db}` watches it")
