"""Issue 36: failed attempts are part of the search graph in an EvoTrace export. A simulated
circle_packing run fails some proposals (patch, syntax, evaluation); every item that never became
an artifact is exported as a candidate with its status, and gets an edge from the parent its
proposal started from. The export validates against the JSON Schemas and an import round-trips
it byte for byte while the imported run's lineage table keeps pool members only."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import FAST, evotui, summary_of

SCHEMAS = Path(__file__).resolve().parents[2] / "engine" / "trace" / "schemas"


def _rows(folder: Path, kind: str) -> list[dict]:
    return [json.loads(line) for line in (folder / f"{kind}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path, dict]:
    base = tmp_path_factory.mktemp("failed_edges")
    db = base / "runs.db"
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--max-proposals", "30", "--seed", "3", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = summary_of(proc)
    folder = base / "export"
    proc = evotui("export", summary["run_id"], str(folder), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return db, summary["run_id"], folder, summary


def test_every_failed_item_has_a_candidate_and_an_edge(exported) -> None:
    db, run_id, folder, summary = exported
    with sqlite3.connect(db) as conn:
        failed_items = conn.execute(
            "SELECT item_id, parent_artifact_id, error FROM items WHERE run_id=? AND outcome='failed'",
            (run_id,)).fetchall()
    assert summary["failed"] >= 1 and len(failed_items) == summary["failed"]
    cands = {c["candidate_id"]: c for c in _rows(folder, "candidates")}
    edges = _rows(folder, "edges")
    into = {}
    for e in edges:
        into.setdefault(e["child_id"], []).append(e)
    for item_id, parent, error in failed_items:
        cand = cands[item_id]
        assert cand["kind"] == "attempt" and cand["status"] == "failed" and cand["reason"] == error
        assert cand["parent_ids"] == [parent]
        (edge,) = into[item_id]
        assert edge["parent_id"] == parent and edge["operator"] == "mutate"
        assert edge["generation_mode"] == "diff"  # circle_packing's patch format, as its artifacts record
    # Pool members still have exactly their lineage rows; every candidate with parents has edges.
    assert all(sorted(e["parent_id"] for e in into.get(cid, [])) == sorted(c["parent_ids"])
               for cid, c in cands.items())
    assert sum(c["kind"] == "artifact" and c["parent_ids"] != [] for c in cands.values()) == summary["accepted"]
    # One edge per parent of every candidate: pool members and attempts of any outcome alike.
    attempts = [c for c in cands.values() if c["kind"] == "attempt"]
    assert len(edges) == summary["accepted"] + sum(len(c["parent_ids"]) for c in attempts)
    assert all(into[c["candidate_id"]] for c in attempts if c["parent_ids"])


def test_export_validates_and_imports_byte_for_byte(exported, tmp_path: Path) -> None:
    _db, run_id, folder, summary = exported
    for kind in ("candidates", "edges"):
        schema = json.loads((SCHEMAS / f"{kind}.json").read_text())
        for row in _rows(folder, kind):
            jsonschema.validate(row, schema)
    db2 = tmp_path / "imported.db"
    proc = evotui("import", str(folder), "--db", str(db2))
    assert proc.returncode == 0, proc.stderr
    new_id = f"{run_id}-imported"
    with sqlite3.connect(db2) as conn:
        children = {r[0] for r in conn.execute("SELECT child_id FROM lineage WHERE run_id=?", (new_id,))}
        artifacts = {r[0] for r in conn.execute("SELECT artifact_id FROM artifacts WHERE run_id=?", (new_id,))}
    assert children and children <= artifacts  # attempt edges are rebuilt from items, not stored as lineage
    again = tmp_path / "again"
    assert evotui("export", new_id, str(again), "--db", str(db2)).returncode == 0
    for kind in ("candidates", "edges"):
        assert (folder / f"{kind}.jsonl").read_bytes() == (again / f"{kind}.jsonl").read_bytes(), kind


def test_a_failed_merge_gets_an_edge_from_each_parent() -> None:
    from engine.trace.collect import attempt_edges, attempt_parents

    item = {"item_id": "i000007", "parent_artifact_id": "a000003", "updated_at": 12.5,
            "payload": {"merge": {"ours": "a000003", "theirs": "a000005", "base": "a000000"}}}
    plain = {"item_id": "i000008", "parent_artifact_id": "a000004", "updated_at": 13.0, "payload": {}}
    kept = {"item_id": "i000009", "parent_artifact_id": "a000004", "updated_at": 14.0, "payload": {}}
    assert attempt_parents(item) == ["a000003", "a000005"]
    edges = attempt_edges([item, plain, kept], [{"parent_id": "a000001", "child_id": "i000009"}], "udiff")
    assert [(e["parent_id"], e["child_id"], e["operator"], e["generation_mode"]) for e in edges] == [
        ("a000003", "i000007", "merge", "merge"), ("a000005", "i000007", "merge", "merge"),
        ("a000004", "i000008", "mutate", "udiff")]
