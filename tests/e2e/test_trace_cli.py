"""EvoTrace commands end to end on a simulated circle_packing run: export validates against the
JSON Schemas, import round-trips, bad input is exit 2 with nothing written, imported runs refuse
to resume; analyze (twice: the second asks no LLM) and replay."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest

from tests.e2e.conftest import FAST, evotui, summary_of

SCHEMAS = Path(__file__).resolve().parents[2] / "engine" / "trace" / "schemas"
TYPES = ("runs", "candidates", "evaluations", "edges", "contexts", "replay_environments")
# What a re-export of an imported run may change (documented in README "Commands").
RUN_FIELDS_THAT_CHANGE = {"run_id", "status", "imported_from"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("trace") / "runs.db"
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--max-proposals", "30", "--seed", "3", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return db, summary_of(proc)["run_id"]


def _validate(folder: Path) -> dict[str, int]:
    manifest = json.loads((folder / "manifest.json").read_text())
    jsonschema.validate(manifest, json.loads((SCHEMAS / "manifest.json").read_text()))
    counts = {}
    for kind in TYPES:
        schema = json.loads((SCHEMAS / f"{kind}.json").read_text())
        rows = [json.loads(line) for line in (folder / f"{kind}.jsonl").read_text().splitlines()]
        for row in rows:
            jsonschema.validate(row, schema)
        counts[kind] = len(rows)
    assert counts == manifest["files"]
    return counts


def test_export_validates_and_round_trips(run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = run
    first = tmp_path / "first"
    proc = evotui("export", run_id, str(first), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    counts = _validate(first)
    cands = [json.loads(x) for x in (first / "candidates.jsonl").read_text().splitlines()]
    assert {c["kind"] for c in cands} == {"artifact", "attempt"}  # failed attempts are kept
    edges = [json.loads(x) for x in (first / "edges.jsonl").read_text().splitlines()]
    assert {e["operator"] for e in edges} <= {"mutate", "merge"} and edges
    ctx = [json.loads(x) for x in (first / "contexts.jsonl").read_text().splitlines()]
    assert counts["contexts"] > 0 and all(c["messages"] for c in ctx)
    for c in ctx:  # blob names are the sha256 of their bytes, texts byte-exact
        for m in c["messages"]:
            if isinstance(m["content"], dict):
                assert (first / "blobs" / m["content"]["blob"]).stat().st_size == m["content"]["size"]

    db2 = tmp_path / "imported.db"
    proc = evotui("import", str(first), "--db", str(db2))
    assert proc.returncode == 0, proc.stderr
    new_id = f"{run_id}-imported"
    show = json.loads(evotui("show", new_id, "--db", str(db2), "--json").stdout)
    assert show["status"] == "imported" and show["artifacts"] == sum(c["kind"] == "artifact" for c in cands)

    resume = evotui("resume", new_id, "--db", str(db2), "--no-ui")
    assert resume.returncode == 2 and "read-only" in resume.stderr and "Traceback" not in resume.stderr

    second = tmp_path / "second"
    assert evotui("export", new_id, str(second), "--db", str(db2)).returncode == 0
    for kind in TYPES[1:]:
        assert (first / f"{kind}.jsonl").read_bytes() == (second / f"{kind}.jsonl").read_bytes(), kind
    a, b = (json.loads((d / "runs.jsonl").read_text()) for d in (first, second))
    assert {k for k in set(a) | set(b) if a.get(k) != b.get(k)} == RUN_FIELDS_THAT_CHANGE
    assert sorted(p.name for p in (first / "blobs").iterdir()) == sorted(p.name for p in (second / "blobs").iterdir())


def test_gepa_format(run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = run
    assert evotui("export", run_id, str(tmp_path / "g"), "--format", "gepa", "--db", str(db)).returncode == 0
    res = json.loads((tmp_path / "g" / "gepa_result.json").read_text())
    n = len(res["candidates"])
    assert n == len(res["parents"]) == len(res["val_aggregate_scores"]) == len(res["val_subscores"])
    assert res["parents"][0] is None and res["val_aggregate_scores"][res["best_idx"]] == max(
        s for s in res["val_aggregate_scores"] if s is not None)


def test_bad_input(run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = run
    proc = evotui("export", "no-such-run", str(tmp_path / "x"), "--db", str(db))
    assert proc.returncode == 2 and "no run 'no-such-run'" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no temp folder left
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    proc = evotui("export", run_id, str(full), "--db", str(db))
    assert proc.returncode == 2 and "not an empty folder" in proc.stderr
    good = tmp_path / "good"
    assert evotui("export", run_id, str(good), "--db", str(db)).returncode == 0
    original = (good / "edges.jsonl").read_text()
    lines = original.splitlines()
    lines[2] = lines[2][:-3]
    (good / "edges.jsonl").write_text("\n".join(lines) + "\n")
    proc = evotui("import", str(good), "--db", str(tmp_path / "i.db"))
    assert proc.returncode == 2 and "edges.jsonl:3: not valid JSON" in proc.stderr
    assert not (tmp_path / "i.db").exists()
    (good / "edges.jsonl").write_text(original)
    (good / "contexts.jsonl").unlink()
    proc = evotui("import", str(good), "--db", str(tmp_path / "i.db"))
    assert proc.returncode == 2 and "contexts.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_analyze_twice_second_makes_no_llm_call(run: tuple[Path, str], tmp_path: Path) -> None:
    db, run_id = run
    report = tmp_path / "report.html"
    proc = evotui("analyze", run_id, "--db", str(db), "--json", "--html", str(report))
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)
    lineage = first["lineage"]  # an asynchronous run may keep its seed as best: depth 0 is legal
    assert lineage["best_lineage_size"] >= lineage["best_depth"] + 1 and 0 <= lineage["dead_branch_share"] <= 1
    assert (lineage["best_depth"] >= 1) == (lineage["best_id"] != lineage["seed_id"])
    assert first["cycling"]["added_lines"] > 0 and set(first["cycling"]["by_class"]) == {"literal", "tuning", "trivial"}
    et = first["edit_types"]
    assert et["judge_calls"] >= 1 and et["unknown"] == 0 and any(r["edits"] for r in et["labels"])
    page = report.read_text()
    assert "<svg" in page and "src=" not in page and "<link" not in page  # self-contained
    second = json.loads(evotui("analyze", run_id, "--db", str(db), "--json").stdout)
    assert second["edit_types"]["judge_calls"] == 0 and second["edit_types"]["cached"] == et["edits"]
    assert second["edit_types"]["labels"] == et["labels"]
    text = evotui("analyze", run_id, "--db", str(db))
    assert all(s in text.stdout for s in ("LINEAGE", "CYCLING", "EDIT TYPES"))
    assert evotui("analyze", "nope", "--db", str(db)).returncode == 2


def test_replay(run: tuple[Path, str]) -> None:
    db, run_id = run
    with sqlite3.connect(db) as conn:  # the best child of a mutation (a merge has no prompt)
        best, = conn.execute("SELECT a.artifact_id FROM artifacts a JOIN lineage l ON l.child_id = a.artifact_id "
                             "AND l.run_id = a.run_id WHERE l.operator = 'mutate' AND a.run_id = ? "
                             "ORDER BY a.val_mean DESC LIMIT 1", (run_id,)).fetchone()
    proc = evotui("replay", run_id, best, "-n", "4", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["n"] == len(res["replies"]) == 4 and res["candidate_id"] == best
    assert all(set(r) >= {"parsed", "evaluated", "score"} for r in res["replies"])
    assert sum(res["classes"].values()) == sum(r["evaluated"] for r in res["replies"])
    assert 0 <= res["exact_match_rate"] <= 1
    nh = evotui("replay", run_id, best, "-n", "2", "--variant", "no-history", "--llm", "sim", "--db", str(db))
    assert nh.returncode == 0 and "no-history prompt" in nh.stdout
    for bad in (["a000000"], ["nope"]):
        proc = evotui("replay", run_id, *bad, "-n", "1", "--db", str(db))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
