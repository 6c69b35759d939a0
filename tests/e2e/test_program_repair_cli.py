"""LLM reflective repair of stale program proposals from the CLI (issue 32): circle_packing in mode
async with the reflective policy on the simulator. Every stale proposal that reaches the reflect
stage with a proposal gets one stored repair call showing its diff and the commits since; the
verdict is a staleness row and rides in the export (the attempt's payload, the child's notes).
Mode chain refuses the policy up front (it rebases stale heads itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import FAST, ROOT, evotui, read_rows, summary_of

TASK = str(ROOT / "tasks" / "circle_packing")


@pytest.fixture(scope="module")
def repaired_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path]:
    # evaluate=2 (the task's eval_concurrency): proposals wait for a sandbox slot in the evaluate
    # queue, where the staleness check sees the commits made meanwhile (with 8 evaluate workers
    # they pass the check and then wait inside the evaluator, so few are ever stale there).
    base = tmp_path_factory.mktemp("program_repair")
    db = base / "runs.db"
    res = evotui("run", TASK, "--no-ui", "--mode", "async", "--policy", "reflective", "--db", str(db),
                 "--max-proposals", "30", "--workers", "evaluate=2", "--seed", "2", *FAST, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = summary_of(res)
    out = base / "export"
    exp = evotui("export", summary["run_id"], str(out), "--db", str(db))
    assert exp.returncode == 0, exp.stderr[-2000:]
    return db, summary, out


def test_each_reflected_proposal_gets_one_repair_call_with_the_diffs(repaired_run) -> None:
    db, summary, out = repaired_run
    run = summary["run_id"]
    rows = read_rows(db, "SELECT item_id, decision, detail_json FROM staleness WHERE run_id = ? AND stage = 'reflect'",
                     run)
    routed = read_rows(db, "SELECT item_id FROM staleness WHERE run_id = ? AND decision = 'reflect'", run)
    assert routed, f"no stale proposal reached the reflect stage: {summary['staleness']}"
    assert sorted(r[0] for r in rows) == sorted(r[0] for r in routed)  # one verdict per routed item
    by_llm = {item: decision for item, decision, detail in rows if json.loads(detail)["llm"]}
    contexts = [json.loads(ln) for ln in (out / "contexts.jsonl").read_text().splitlines()]
    calls = {c["item_id"]: c for c in contexts if c["stage"] == "reflect"}
    assert set(calls) == set(by_llm) and summary["llm_by_stage"]["reflect"]["calls"] == len(calls)
    for item, call in calls.items():
        user = _text(out, call["messages"][-1]["content"])
        assert "## Stale proposal" in user and "Its change to its parent:\n```diff\n" in user
        assert "## Programs committed since version" in user and "### v" in user  # at least one commit's diff
        reply = _text(out, call["response"])
        assert reply.startswith("VERDICT: ")  # the simulator read the request as a repair
        if by_llm[item] in ("keep", "patch"):  # (a patch the filters refuse is recorded as a discard)
            assert reply.startswith(f"VERDICT: {by_llm[item]}")
    verdicts = {v: n for v, n in summary["staleness"].items() if v.startswith("reflect_")}
    assert sum(verdicts.values()) == summary["staleness"]["reflect"] == len(rows)


def test_the_verdict_is_in_the_export(repaired_run) -> None:
    db, summary, out = repaired_run
    decided = dict(read_rows(db, "SELECT item_id, decision FROM staleness WHERE run_id = ? AND stage = 'reflect'",
                             summary["run_id"]))
    seen = {}
    for line in (out / "candidates.jsonl").read_text().splitlines():
        cand = json.loads(line)
        payload = (cand.get("item") or {}).get("payload") or {}
        if "repair" in payload:
            seen[cand["item"]["item_id"]] = payload["repair"]["verdict"]
            note = payload["notes"]["stale_repair"]
            assert note.startswith(payload["repair"]["verdict"] + " at pool v")
            if cand["kind"] == "artifact":  # a committed child carries the note in its meta too
                assert cand["meta"]["notes"]["stale_repair"] == note
    assert seen == decided


def test_mode_chain_refuses_the_policy_in_one_line(tmp_path: Path) -> None:
    res = evotui("run", TASK, "--no-ui", "--mode", "chain", "--policy", "reflective", "--db",
                 str(tmp_path / "r.db"), "--max-proposals", "2", *FAST)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "policy 'reflective' applies to mode async" in res.stderr


def _text(out: Path, content) -> str:
    """A message's text from the export: inline, or a blob file for texts over 512 bytes."""
    if isinstance(content, dict) and "blob" in content:
        return (out / "blobs" / content["blob"]).read_text()
    return content
