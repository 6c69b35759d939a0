"""Island migrations as rows and task-declared grid axes in the views, end to end on the simulated
backend: a loongflow run of circle_packing with two [[descriptor]] axes and a short migration
interval records each migration the fold makes as a migrations row (trigger figures and all, the
same the fold rebuilt from the artifacts gives); `evotui show` names the declared axes, draws
the islands' cells on them and lists the rows; the EvoTrace export carries the rows and an import
of it gets them back; a task.toml that no longer declares the axes falls back with one warning."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of
from tests.e2e.declared_axes import cell, task_with

CONFIG = ('[strategy]\nname = "loongflow"\n[strategy.loongflow]\nmigration_interval = 3\n'
          'migration_threshold = 0.05\n')
COLUMNS = ("pool_version", "at_commit", "from_island", "to_island", "artifact_ids_json", "trigger",
           "from_diversity", "to_diversity", "threshold", "interval")


def _run(tmp_path: Path, db: Path) -> tuple[Path, dict]:
    task = task_with(tmp_path)
    config = tmp_path / "lf.toml"
    config.write_text(CONFIG)
    proc = evotui("run", str(task), "--no-ui", "--db", str(db), "--config", str(config), "--mode", "sync",
                  "--seed", "3", "--max-proposals", "12", *FAST, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return task, summary_of(proc)


def _rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT {', '.join(COLUMNS)} FROM migrations ORDER BY at_commit, rowid").fetchall()
    finally:
        con.close()


def test_rows_show_export_and_import_of_a_run_with_declared_axes(db: Path, tmp_path: Path) -> None:
    task, summary = _run(tmp_path, db)
    rows = _rows(db)
    assert rows, "a 3-commit interval over 12 proposals made no migration"
    assert all(r[5] == "diversity" and r[8] == 0.05 and r[9] == 3 and r[1] % 3 == 0 for r in rows)
    # The trigger: the two islands' diversity differed by more than the threshold.
    assert all(abs(r[6] - r[7]) > 0.05 for r in rows)

    shown = evotui("show", "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    info = json.loads(shown.stdout)
    assert [a["name"] for a in info["grid_axes"]] == ["smallest circle", "program size"]
    assert [a["bins"] for a in info["grid_axes"]] == [4, 3] and info["grid_axes"][0]["declared"]
    # The rows are the fold's own migrations, rebuilt from the stored artifacts on the declared axes.
    rebuilt = [(m["version"], m["at"], m["from"], m["to"], m["migrants"], m["from_diversity"], m["to_diversity"])
               for m in info["migrations_rebuilt"]]
    assert rebuilt == [(r[0], r[1], r[2], r[3], json.loads(r[4]), r[6], r[7]) for r in rows]
    assert len(info["migrations"]) == len(rows)
    # Every elite sits in the cell its stored metric and length bin to on the declared ranges.
    con = sqlite3.connect(db)
    arts = {a: (json.loads(m), t) for a, m, t in con.execute("SELECT artifact_id, meta_json, text FROM artifacts")}
    con.close()
    cells = [c for isl in info["islands"] for c in isl["cells"]]
    assert cells
    for c in cells:
        meta, text = arts[c["id"]]
        radius = (meta.get("metrics") or {}).get("min_radius")
        assert c["cell"] == [cell(radius, 0.0, 0.01, 4), cell(len(text), 2000, 5000, 3)], c

    human = evotui("show", "--db", str(db))
    assert human.returncode == 0 and "Traceback" not in human.stderr
    lines = human.stdout.splitlines()
    axes = next(ln for ln in lines if ln.startswith("grid axes"))
    assert "smallest circle (min_radius 0..0.01, 4 bins) x program size (length 2000..5000, 3 bins)" in axes
    head = next(ln for ln in lines if ln.startswith("migrations"))
    assert f"{len(rows)} recorded (trigger: diversity differs > 0.05, checked every 3 commits)" in head
    newest = rows[-1]
    assert f"v{newest[0]} {newest[2]}->{newest[3]} (D {newest[6]:.2f} vs {newest[7]:.2f})" in human.stdout

    exported = tmp_path / "trace"
    proc = evotui("export", summary["run_id"], str(exported), "--db", str(db))
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads((exported / "runs.jsonl").read_text().splitlines()[0])
    assert [(m["pool_version"], m["at_commit"], m["from_island"], m["to_island"], m["artifact_ids"])
            for m in run["island_migrations"]] == [(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in rows]
    other = tmp_path / "imported.db"
    proc = evotui("import", str(exported), "--db", str(other))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _rows(other) == rows

    # The task folder gone: the default grid, with one warning line saying so.
    shutil.rmtree(task)
    gone = evotui("show", "--db", str(db))
    assert gone.returncode == 0 and "Traceback" not in gone.stderr
    warnings = [ln for ln in gone.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1 and "is no longer there; the islands grid is drawn on the default axes" in warnings[0]
    assert "grid axes      length (text length, min-max over the island) x novelty" in gone.stdout


def test_an_import_with_malformed_migrations_is_one_line(db: Path, tmp_path: Path) -> None:
    _, summary = _run(tmp_path, db)
    exported = tmp_path / "trace"
    assert evotui("export", summary["run_id"], str(exported), "--db", str(db)).returncode == 0
    runs = exported / "runs.jsonl"
    run = json.loads(runs.read_text().splitlines()[0])
    del run["island_migrations"][0]["trigger"]
    runs.write_text(json.dumps(run) + "\n")
    proc = evotui("import", str(exported), "--db", str(tmp_path / "other.db"))
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "island_migrations[0] lacks trigger" in lines[0] and "Traceback" not in proc.stderr
