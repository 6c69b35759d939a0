"""`evotui tune` end to end on a short simulated circle_packing run: the report (evolved score,
rewrite check, tuned ceiling, knobs), a seeded search that repeats exactly, --rank with the
simulator, --add through the ledger (a new artifact, lineage operator tune), and bad input: a
candidate without numeric constants is exit 2 with nothing written."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, evotui, summary_of

ROOT = Path(__file__).resolve().parents[2]
NO_KNOBS = '''import numpy as np


# EVOLVE-BLOCK-START
def construct_packing():
    centers = np.zeros((26, 2))
    radii = np.zeros(26)
    return centers, radii
# EVOLVE-BLOCK-END


def run_packing():
    centers, radii = construct_packing()
    return centers, radii, float(np.sum(radii))
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    db = tmp_path_factory.mktemp("tune") / "runs.db"
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--max-proposals", "20", "--seed", "5", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    return db, s["run_id"], s["best_id"]


def _tune(db: Path, run_id: str, cand: str, *extra: str) -> dict:
    proc = evotui("tune", run_id, cand, "--db", str(db), "--trials", "6", "--json", *extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _rows(db: Path, run_id: str) -> tuple[int, int, int]:
    with sqlite3.connect(db) as conn:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t} WHERE run_id = ?", (run_id,)).fetchone()[0]
                     for t in ("artifacts", "lineage", "pool_events"))


def test_tune_reports_and_repeats(run: tuple[Path, str, str]) -> None:
    db, run_id, best = run
    before = _rows(db, run_id)
    res = _tune(db, run_id, best)
    assert res["trials"] == 6 and res["startup_trials"] == 2 and len(res["trial_rows"]) == 6
    assert [r["phase"] for r in res["trial_rows"]] == ["random"] * 2 + ["tpe"] * 4
    assert res["rewrite_ok"] and 1 <= len(res["knobs"]) <= 8
    assert res["tuned_ceiling"] >= res["evolved_score"] and res["added"] is None
    for k in res["knobs"]:
        assert k["low"] <= k["tuned"] <= k["high"]
    again = _tune(db, run_id, best)
    assert [r["score"] for r in again["trial_rows"]] == [r["score"] for r in res["trial_rows"]]  # seeded
    assert _rows(db, run_id) == before  # without --add nothing is written
    text = evotui("tune", run_id, best, "--db", str(db), "--trials", "3")
    assert text.returncode == 0 and "evolved score" in text.stdout and "tuned ceiling" in text.stdout


def test_tune_with_the_simulated_ranking(run: tuple[Path, str, str]) -> None:
    db, run_id, best = run
    res = _tune(db, run_id, best, "--rank", "--llm", "sim")
    assert res["chosen"]["ranked_by"] == "llm" and res["knobs"]


def test_add_puts_the_tuned_program_in_the_pool(run: tuple[Path, str, str], tmp_path: Path) -> None:
    db, run_id, best = run
    copy = tmp_path / "copy.db"
    shutil.copy(db, copy)
    arts, lin, events = _rows(copy, run_id)
    res = _tune(copy, run_id, best, "--add")
    new = res["added"]["artifact_id"]
    assert _rows(copy, run_id) == (arts + 1, lin + 1, events + 1)
    with sqlite3.connect(copy) as conn:
        assert conn.execute("SELECT parent_id, operator FROM lineage WHERE run_id = ? AND child_id = ?",
                            (run_id, new)).fetchone() == (best, "tune")
        text, score = conn.execute("SELECT text, val_mean FROM artifacts WHERE run_id = ? AND artifact_id = ?",
                                   (run_id, new)).fetchone()
    assert "PARAMS = {" in text and score == pytest.approx(res["tuned_ceiling"])
    show = json.loads(evotui("show", run_id, "--db", str(copy), "--json").stdout)
    assert show["artifacts"] == arts + 1


def test_add_to_an_imported_run_is_refused_before_any_trial(run: tuple[Path, str, str], tmp_path: Path) -> None:
    db, run_id, best = run
    folder, imported = tmp_path / "exp", tmp_path / "imp.db"
    assert evotui("export", run_id, str(folder), "--db", str(db)).returncode == 0
    assert evotui("import", str(folder), "--db", str(imported)).returncode == 0
    before = _rows(imported, f"{run_id}-imported")
    proc = evotui("tune", f"{run_id}-imported", best, "--db", str(imported), "--add", "--trials", "2")
    assert proc.returncode == 2 and "read-only" in proc.stderr and "Traceback" not in proc.stderr
    assert _rows(imported, f"{run_id}-imported") == before
    ok = evotui("tune", f"{run_id}-imported", best, "--db", str(imported), "--trials", "2")  # reading is fine
    assert ok.returncode == 0, ok.stderr


def test_candidate_without_constants_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "flat"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    (task / "initial_program.py").write_text(NO_KNOBS)
    db = tmp_path / "flat.db"
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--max-proposals", "2", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = summary_of(proc)["run_id"]
    before = _rows(db, run_id)
    proc = evotui("tune", run_id, "a000000", "--db", str(db), "--add")
    assert proc.returncode == 2 and "no numeric constants" in proc.stderr and "Traceback" not in proc.stderr
    assert _rows(db, run_id) == before
    for bad in (["nope", "a000000"], [run_id, "a999999"]):
        proc = evotui("tune", *bad, "--db", str(db))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert evotui("tune", run_id, "a000000", "--db", str(tmp_path / "none.db")).returncode == 2
