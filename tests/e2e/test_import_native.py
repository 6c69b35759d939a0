"""`evotui import` of runs made by the real peers (OpenEvolve's checkpoint, GEPA's run_dir against
`evotui sim-server`; a database written by ShinkaEvolve's own ProgramDatabase), then show,
analyze, export and branch on the imported run; bad input is one line and exit 2."""

from __future__ import annotations

import json
import pickle
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, ROOT, evotui, summary_of


def _native(kind: str, out: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.e2e.native_runs", kind, str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _import(path: Path, db: Path, *extra: str) -> str:
    proc = evotui("import", str(path), "--db", str(db), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split(" as ", 1)[1].split(" ", 1)[0]


def _exported(run_id: str, db: Path, target: Path) -> list[dict]:
    proc = evotui("export", run_id, str(target), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (target / "candidates.jsonl").read_text().splitlines()]
    for row in rows:  # texts over 512 bytes are in blobs/SHA256
        if isinstance(row["source"], dict):
            row["source"] = (target / "blobs" / row["source"]["blob"]).read_text(encoding="utf-8")
    return rows


def _analyzed(run_id: str, db: Path) -> dict:
    proc = evotui("analyze", run_id, "--db", str(db), "--no-judge", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _branch(run_id: str, artifact: str, db: Path, *extra: str) -> dict:
    proc = evotui("branch", run_id, artifact, "--db", str(db), "--no-ui", "--max-proposals", "4", *extra, *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    new = summary_of(proc)
    shown = json.loads(evotui("show", new["run_id"], "--db", str(db), "--json").stdout)
    assert shown["branched_from"] == {"run_id": run_id, "artifact_id": artifact}
    return new


def _edges(candidates: list[dict]) -> set[tuple[str, str]]:
    source_of = {c["candidate_id"]: c["meta"]["source_id"] for c in candidates}
    return {(source_of[p], c["meta"]["source_id"]) for c in candidates for p in c["parent_ids"]}


def test_openevolve_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("openevolve")
    _native("openevolve", tmp_path / "oe")
    checkpoint = tmp_path / "oe" / "output" / "checkpoints" / "checkpoint_4"  # the latest of 2 and 4
    programs = {p["id"]: p for p in (json.loads(f.read_text()) for f in (checkpoint / "programs").glob("*.json"))}
    db = tmp_path / "runs.db"
    run_id = _import(tmp_path / "oe" / "output", db, "--task", "circle_packing")

    shown = json.loads(evotui("show", run_id, "--db", str(db), "--json").stdout)
    assert shown["status"] == "imported" and shown["artifacts"] == len(programs)
    cands = _exported(run_id, db, tmp_path / "export")
    assert {c["meta"]["source_id"] for c in cands} == set(programs)
    for c in cands:
        p = programs[c["meta"]["source_id"]]
        assert c["source"] == p["code"] and c["val_mean"] == p["metrics"]["combined_score"]
    assert _edges(cands) == {(p["parent_id"], i) for i, p in programs.items() if p["parent_id"] in programs}
    calls = [json.loads(x) for x in (tmp_path / "export" / "contexts.jsonl").read_text().splitlines()]
    assert len(calls) == sum(1 for p in programs.values() if p.get("prompts"))  # the logged prompts and replies

    lineage = _analyzed(run_id, db)["lineage"]
    assert lineage["best_score"] == max(p["metrics"]["combined_score"] for p in programs.values())
    assert lineage["proposals"] == sum(1 for c in cands if c["parent_ids"])
    child = next(c for c in cands if c["parent_ids"] and programs[c["meta"]["source_id"]].get("prompts"))
    # The child's logged prompt is re-sent and each reply applied to its parent and evaluated.
    rep = evotui("replay", run_id, child["candidate_id"], "-n", "2", "--llm", "sim", "--db", str(db), "--json")
    assert rep.returncode == 0, rep.stderr
    replayed = json.loads(rep.stdout)
    assert replayed["parent_id"] == child["parent_ids"][0] and len(replayed["replies"]) == 2
    assert replayed["recorded_score"] == child["val_mean"] and replayed["task_kind"] == "program"
    assert _branch(run_id, child["candidate_id"], db)["status"] == "completed"


def test_gepa_run_dir(tmp_path: Path) -> None:
    pytest.importorskip("gepa")
    from gepa.core.state import GEPAState

    _native("gepa", tmp_path / "gepa")
    state = GEPAState.load(str(tmp_path / "gepa"))  # GEPA's own reader, as the reference
    db = tmp_path / "runs.db"
    run_id = _import(tmp_path / "gepa", db)  # no task: branch names it

    cands = _exported(run_id, db, tmp_path / "export")
    assert [c["source"] for c in cands] == [c["system_prompt"] for c in state.program_candidates]
    means = [sum(s.values()) / len(s) for s in state.prog_candidate_val_subscores]
    assert [c["val_mean"] for c in cands] == pytest.approx(means)
    assert _edges(cands) == {(str(p), str(i)) for i, ps in enumerate(state.parent_program_for_candidate)
                             for p in ps if p is not None}
    evals = (tmp_path / "export" / "evaluations.jsonl").read_text().splitlines()
    assert len(evals) == sum(len(s) for s in state.prog_candidate_val_subscores)

    lineage = _analyzed(run_id, db)["lineage"]
    best = max(range(len(means)), key=means.__getitem__)
    assert lineage["best_score"] == pytest.approx(means[best]) and lineage["proposals"] == len(means) - 1
    no_task = evotui("branch", run_id, f"a{best:06d}", "--db", str(db), "--no-ui", *FAST)
    assert no_task.returncode == 2 and "--task" in no_task.stderr and "Traceback" not in no_task.stderr
    assert _branch(run_id, f"a{best:06d}", db, "--task", "rules")["status"] == "completed"


def test_shinka_database(tmp_path: Path) -> None:
    shinka = pytest.importorskip("shinka.database")
    # A Shinka results folder inside a copy of the task: import finds the task above it.
    task = tmp_path / "circle_packing"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    (task / "results").mkdir()
    path = task / "results" / "programs.sqlite"
    seed = (task / "initial_program.py").read_text()
    sdb = shinka.ProgramDatabase(shinka.DatabaseConfig(db_path=str(path), num_islands=2))
    sdb.add(shinka.Program(id="p0", code=seed, combined_score=0.5, correct=True, public_metrics={"sum_radii": 0.5}))
    copy = sqlite3.connect(path).execute("SELECT id FROM programs WHERE id != 'p0'").fetchone()[0]  # island 1's seed
    wider = seed.replace("spacing_x = 0.1", "spacing_x = 0.11")
    sdb.add(shinka.Program(id="p1", code=wider, parent_id="p0", generation=1, combined_score=0.6, correct=True))
    sdb.add(shinka.Program(id="p2", code=seed + "\n# two\n", parent_id=copy, generation=1, combined_score=0.4,
                           correct=True))
    sdb.add(shinka.Program(id="p3", code=wider + "\n# bad\n", parent_id="p1", generation=2, combined_score=0.0,
                           correct=False, text_feedback="overlapping circles"))
    sdb.close()
    db = tmp_path / "runs.db"
    run_id = _import(path, db)

    cands = _exported(run_id, db, tmp_path / "export")
    assert [c["meta"]["source_id"] for c in cands] == ["p0", "p1", "p2", "p3"]  # the island copy is p0
    assert _edges(cands) == {("p0", "p1"), ("p0", "p2"), ("p1", "p3")}
    assert [c["val_mean"] for c in cands] == [0.5, 0.6, 0.4, 0.0] and cands[3]["meta"]["correct"] is False
    run = json.loads((tmp_path / "export" / "runs.jsonl").read_text())
    assert run["task_path"] == str(task.resolve())
    lineage = _analyzed(run_id, db)["lineage"]
    assert (lineage["best_id"], lineage["best_depth"], lineage["proposals"]) == ("a000001", 1, 3)
    assert _branch(run_id, "a000001", db)["status"] == "completed"  # on the task found above the database


def test_gepa_state_with_components_and_a_merge(tmp_path: Path) -> None:
    """A two-component GEPA state written by GEPA's own GEPAState (no LLM): each candidate is one
    artifact with its components, a two-parent candidate is a merge."""
    pytest.importorskip("gepa")
    import numpy as np
    from gepa.core.state import GEPAState, ValsetEvaluation

    def scores(*s: float) -> ValsetEvaluation:
        return ValsetEvaluation(outputs_by_val_id={i: "" for i in range(len(s))},
                                scores_by_val_id={i: np.float64(v) for i, v in enumerate(s)})  # as adapters return

    state = GEPAState({"plan": "Plan first.", "answer": "Answer briefly."}, scores(0.0, 0.5))
    state.update_state_with_new_program([0], {"plan": "Plan in steps.", "answer": "Answer briefly."},
                                        scores(0.5, 0.5), None, 10)
    state.update_state_with_new_program([0], {"plan": "Plan first.", "answer": "One line."}, scores(0.0, 1.0), None, 20)
    state.update_state_with_new_program([1, 2], {"plan": "Plan in steps.", "answer": "One line."},
                                        scores(1.0, 1.0), None, 30)
    (tmp_path / "run").mkdir()
    state.save(str(tmp_path / "run"))
    db = tmp_path / "runs.db"
    run_id = _import(tmp_path / "run", db)
    cands = _exported(run_id, db, tmp_path / "export")
    assert [[(c["name"], c["text"]) for c in cand["components"]] for cand in cands] == [
        list(p.items()) for p in state.program_candidates]
    assert cands[3]["source"] == "## [plan]\nPlan in steps.\n\n## [answer]\nOne line."
    assert [c["val_mean"] for c in cands] == [0.25, 0.5, 0.5, 1.0]
    edges = [json.loads(x) for x in (tmp_path / "export" / "edges.jsonl").read_text().splitlines()]
    assert sorted((e["parent_id"], e["child_id"], e["operator"]) for e in edges) == [
        ("a000000", "a000001", "mutate"), ("a000000", "a000002", "mutate"),
        ("a000001", "a000003", "merge"), ("a000002", "a000003", "merge")]


# ShinkaEvolve's programs table as shinka/database/dbase.py creates it (0.0.7), for machines
# without the library: the same import, checked without Shinka's own writer.
_SHINKA_PROGRAMS = """CREATE TABLE programs (id TEXT PRIMARY KEY, code TEXT NOT NULL, language TEXT NOT NULL,
    parent_id TEXT, archive_inspiration_ids TEXT, top_k_inspiration_ids TEXT, generation INTEGER NOT NULL,
    timestamp REAL NOT NULL, code_diff TEXT, combined_score REAL, public_metrics TEXT, private_metrics TEXT,
    text_feedback TEXT, complexity REAL, embedding TEXT, embedding_pca_2d TEXT, embedding_pca_3d TEXT,
    embedding_cluster_id INTEGER, correct BOOLEAN DEFAULT 0, children_count INTEGER NOT NULL DEFAULT 0,
    metadata TEXT, migration_history TEXT, island_idx INTEGER, system_prompt_id TEXT)"""


def test_shinka_schema_without_the_library(tmp_path: Path) -> None:
    path = tmp_path / "results" / "evolution_db.sqlite"  # the older releases' name
    path.parent.mkdir()
    con = sqlite3.connect(path)
    con.execute(_SHINKA_PROGRAMS)
    rows = [("p0", None, 0, 1.0, 0.5, 1, {}), ("c1", None, 0, 1.5, 0.5, 1, {"_is_island_copy": True,
                                                                          "_original_program_id": "p0"}),
            ("p1", "c1", 1, 2.0, 0.7, 1, {}), ("p2", "p1", 2, 3.0, None, 0, {})]
    con.executemany("INSERT INTO programs (id, code, language, parent_id, generation, timestamp, combined_score, "
                    "correct, metadata, public_metrics) VALUES (?, ?, 'python', ?, ?, ?, ?, ?, ?, '{}')",
                    [(i, f"print({n})\n", parent, gen, t, score, ok, json.dumps(meta))
                     for n, (i, parent, gen, t, score, ok, meta) in enumerate(rows)])
    con.commit()
    con.close()
    db = tmp_path / "runs.db"
    run_id = _import(path.parent, db)
    cands = _exported(run_id, db, tmp_path / "export")
    assert [(c["meta"]["source_id"], c["source"], c["val_mean"]) for c in cands] == [
        ("p0", "print(0)\n", 0.5), ("p1", "print(2)\n", 0.7), ("p2", "print(3)\n", None)]
    assert _edges(cands) == {("p0", "p1"), ("p1", "p2")}  # the island copy c1 is the seed p0
    lineage = _analyzed(run_id, db)["lineage"]
    assert (lineage["best_id"], lineage["best_depth"], lineage["proposals"]) == ("a000001", 1, 2)


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    (tmp_path / "empty").mkdir()
    proc = evotui("import", str(tmp_path / "empty"), "--db", str(db))
    assert proc.returncode == 2 and "not a run evotui can import" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not db.exists()
    # A GEPA state file that would run code when unpickled is refused before anything runs.
    run_dir = tmp_path / "gepa"
    run_dir.mkdir()
    marker = tmp_path / "ran"
    (run_dir / "gepa_state.bin").write_bytes(
        b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    proc = evotui("import", str(run_dir), "--db", str(db))
    assert proc.returncode == 2 and "os.system" in proc.stderr and "no code from the file runs" in proc.stderr
    assert not marker.exists() and not db.exists()
    (run_dir / "gepa_state.bin").write_bytes(pickle.dumps({"program_candidates": [{"p": "x"}]}))
    proc = evotui("import", str(run_dir), "--db", str(db))
    assert proc.returncode == 2 and "not a GEPA state" in proc.stderr and not db.exists()
    proc = evotui("import", str(tmp_path / "empty"), "--task", "no-such-task", "--db", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
