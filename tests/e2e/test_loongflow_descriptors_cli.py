"""LoongFlow with task-declared descriptors, end to end on the simulated backend: circle_packing
with a [[descriptor]] on the evaluator's min_radius metric (and one on length) runs with
--strategy loongflow; every stored child's selection cell is the one its parent's stored metric
and length bin to, its visit count continues across a stop and resume, and a bad descriptor is
one line naming task.toml with exit code 2."""

import json
import sqlite3
from collections import Counter
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of
from tests.e2e.declared_axes import DESCRIPTORS, cell, task_with

def _expected_cell(parent: dict) -> list[int]:
    radius = (parent["meta"].get("metrics") or {}).get("min_radius")
    return [cell(radius, 0.0, 0.01, 4), cell(len(parent["text"]), 2000, 5000, 3)]


def _artifacts(db: Path) -> list[dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT artifact_id, text, parent_ids_json, meta_json, status, created_version "
                           "FROM artifacts ORDER BY created_version").fetchall()
    finally:
        con.close()
    return [{"id": a, "text": t, "parents": json.loads(p), "meta": json.loads(m), "status": s, "version": v}
            for a, t, p, m, s, v in rows]


def test_children_are_picked_from_cells_of_the_declared_metric_and_visits_survive_resume(db, tmp_path):
    task = task_with(tmp_path, DESCRIPTORS)
    first = evotui("run", str(task), "--no-ui", "--db", str(db), "--strategy", "loongflow", "--mode", "sync",
                   "--max-proposals", "6", *FAST, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    s1 = summary_of(first)
    again = evotui("resume", s1["run_id"], "--no-ui", "--db", str(db), "--max-proposals", "14", "--quiet", timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert summary_of(again)["proposal_attempts"] == 14
    arts = _artifacts(db)
    by_id = {a["id"]: a for a in arts}
    children = [a for a in arts if a["status"] != "seed"]
    before_resume = {a["id"] for a in arts if a["version"] <= s1["pool_version"]}
    assert len(children) >= 8 and len(before_resume) < len(arts)
    seen: Counter = Counter()
    continued = 0
    for child in children:
        sel = child["meta"]["selection"]
        parent = by_id[child["parents"][0]]
        assert sel["cell"] == _expected_cell(parent), (child["id"], sel, parent["meta"].get("metrics"))
        key = (sel["island"], tuple(sel["cell"]))
        # Every pick counts (a failed proposal's too, which stores no child): at least the stored
        # children picked there before, across the resume as well (a fresh count would restart at 0).
        assert sel["visits"] >= seen[key], (child["id"], sel, seen)
        continued += child["id"] not in before_resume and seen[key] > 0
        seen[key] += 1
    assert continued >= 1  # some cell picked before the stop was picked again after the resume
    assert len({tuple(c["meta"]["selection"]["cell"]) for c in children}) >= 2  # the metric spreads them


def test_a_metric_the_evaluator_does_not_return_is_a_one_line_error(db, tmp_path):
    task = task_with(tmp_path, DESCRIPTORS.replace('"min_radius"', '"min_radiuz"'))
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--strategy", "loongflow", "--max-proposals", "3",
                  *FAST, timeout=300)
    assert proc.returncode == 2
    assert "task.toml: [[descriptor]] #1 metric = 'min_radiuz'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_descriptor_range_is_refused_before_the_run(db, tmp_path):
    task = task_with(tmp_path, DESCRIPTORS.replace("range = [2000, 5000]", "range = [5000, 2000]"))
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--strategy", "loongflow", *FAST)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "task.toml: [[descriptor]] #2" in lines[0] and "lo < hi" in lines[0], proc.stderr
