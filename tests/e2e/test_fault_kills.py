"""Kill -9 at random points in every mode, resume, repeat: the proposal budget stays exact.

Each trial starts a run, then kills the driving process (SIGKILL) at a random moment, resumes it,
kills it again, ... and finally lets a resume finish. Whatever the kill points, the database must
end with exactly --max-proposals charged proposals, no open items, a consistent pool and a clean
`PRAGMA integrity_check`. The kill moments come from a seeded RNG; the assertions hold for any of
them, so the test does not depend on timing. EVOTUI_FAULT_KILLS (default 3) sets the kills per
mode; the figures in the issue notes use 20.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evotui.bench.cascade_variant import slow_variant
from tests.e2e.conftest import ROOT

KILLS = int(os.environ.get("EVOTUI_FAULT_KILLS", "3"))
BUDGET = 10
CASCADE = "circle_packing with a slow cascade stage"

MODES = {
    "sync": ("rules", ["--mode", "sync"]),
    "async": ("rules", []),
    "async-reflective": ("rules", ["--policy", "reflective", "--max-in-flight", "8"]),
    "pxn": ("rules", ["--mode", "pxn"]),
    "chain": ("rules", ["--mode", "chain"]),
    "program-async": ("circle_packing", []),
    "program-chain": ("circle_packing", ["--mode", "chain"]),
    "program-chain-loongflow": ("circle_packing", ["--mode", "chain", "--strategy", "loongflow"]),
    "program-chain-contextevolve": ("circle_packing", ["--mode", "chain", "--strategy", "contextevolve"]),
    # A cascade copy of circle_packing (evotui/bench/cascade_variant.py) with speculation on.
    "program-chain-speculation": (CASCADE, ["--mode", "chain", "--config", "{speculation}"]),
}


def _cli(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "evotui.cli", *args, "--no-ui", "--quiet", "--db", str(db)]


def _proposals(db: Path) -> int:
    """Items whose propose stage finished with a proposal (made or failed), from the stage log:
    a record that every version of evotui writes, so the test also judges older ones."""
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(DISTINCT item_id) FROM item_stages WHERE stage = 'propose' "
                           "AND outcome IN ('forwarded', 'failed')").fetchone()[0]
    finally:
        con.close()


def _charged(db: Path) -> tuple[int, int]:
    """(proposals the budget charged, by their item rows; open items)."""
    con = sqlite3.connect(db)
    try:
        charged = con.execute("SELECT count(*) FROM items WHERE json_extract(payload_json, '$.proposal') "
                              "IS NOT NULL").fetchone()[0]
        open_items = con.execute("SELECT count(*) FROM items WHERE outcome IS NULL").fetchone()[0]
        return charged, open_items
    finally:
        con.close()


def _run_with_kill(cmd: list[str], db: Path, rng: random.Random, progress=None, top: int = BUDGET) -> bool:
    """Start cmd; once the database shows a random number (below `top`) of proposals (or of what
    `progress(db)` counts), wait a random moment more and SIGKILL it. Returns True if it was
    killed, False if it ended first (exit code checked)."""
    progress = progress or _proposals
    target, extra = rng.randrange(0, top), rng.uniform(0.0, 0.3)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            try:
                if db.exists() and progress(db) >= target:
                    break
            except sqlite3.OperationalError:
                pass  # the schema is being created: poll again
            time.sleep(0.02)
        try:
            proc.wait(timeout=extra)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return True
        assert proc.returncode == 0, proc.stderr.read()[-2000:]
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def _has_run(db: Path) -> bool:
    try:
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.OperationalError:  # killed while the schema was being created
        return False


def _check(db: Path, summary: dict, label: str) -> None:
    assert summary["status"] == "completed", label
    assert _proposals(db) == BUDGET, f"{label}: {_proposals(db)} proposals for a budget of {BUDGET}"
    charged, open_items = _charged(db)
    assert (charged, open_items) == (BUDGET, 0), label
    assert summary["proposal_attempts"] == BUDGET and summary["budget_spent"]["proposals"] == BUDGET, label
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = [v for (v,) in con.execute("SELECT version FROM pool_events ORDER BY version")]
        assert versions == list(range(1, len(versions) + 1)), label
        # Every accepted item's artifact is in the pool: nothing committed was lost to a kill.
        accepted = {f"a{i[1:]}" for (i,) in con.execute("SELECT item_id FROM items WHERE outcome = 'accepted'")}
        artifacts = {a for (a,) in con.execute("SELECT artifact_id FROM artifacts")}
        assert accepted <= artifacts, label
        # No item is open, so no speculative artifact is left unconfirmed (a resumed item owns its own).
        assert con.execute("SELECT count(*) FROM artifacts WHERE status = 'speculative'").fetchone()[0] == 0, label
    finally:
        con.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_random_kills_keep_the_proposal_budget_exact(tmp_path: Path, mode: str) -> None:
    task, flags = MODES[mode]
    if task == CASCADE:
        task = str(slow_variant("circle_packing", 0.2, tmp_path))
        config = tmp_path / "speculation.toml"
        config.write_text("[pipeline]\nspeculation = true\n")
        flags = [f.format(speculation=config) for f in flags]
    rng = random.Random(f"kills-{mode}")
    time_scale = "100" if task == "rules" else "50"
    kills = runs = 0
    while kills < KILLS:
        runs += 1
        db = tmp_path / f"k{runs}.db"
        cmd = _cli(db, "run", task, "--max-proposals", str(BUDGET), "--time-scale", time_scale, *flags)
        # Kill this run at random points until a session completes it (or the kills are used up).
        while kills < KILLS and _run_with_kill(cmd, db, rng):
            kills += 1
            assert _proposals(db) <= BUDGET, f"{mode}: {_proposals(db)} proposals after kill {kills}"
            if _has_run(db):  # a kill before the run row was written leaves nothing to resume: run again
                cmd = _cli(db, "resume")
        final = subprocess.run(_cli(db, "resume"), cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert final.returncode == 0, final.stderr[-2000:]
        _check(db, json.loads(final.stdout.strip().splitlines()[-1]), f"{mode}, run {runs}")
    print(f"{mode}: {kills} kills over {runs} runs, each ended with exactly {BUDGET} proposals")
