"""Issue 15 on the agent task, through the CLI on the simulated backend: the sepl strategy's
audit rows, component versions (history, diffs, restore to a version), hot-swap through the
control socket (a frozen component refused), and kill -9 + resume keeping every version."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from evotui.control import socket_path
from tests.e2e.conftest import FAST, ROOT, evotui, summary_of, wait_live, read_rows

TRANSITIONS = ["reflect", "select", "improve"]


def _versions(db: Path, run_id: str) -> dict:
    res = evotui("components", run_id, "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _all_versions(info: dict) -> set[tuple[str, str, str, str]]:
    return {(n, v["version"], v["artifact_id"], v["text"]) for n, c in info["components"].items() for v in c["versions"]}


def test_sepl_writes_an_audit_row_per_transition_and_versions_follow_commits(db):
    res = evotui("run", "agent_tools", "--no-ui", "--mode", "async", "--strategy", "sepl", "--db", str(db),
                 "--max-proposals", "16", *FAST)
    assert res.returncode == 0, res.stderr[-2000:]
    s = summary_of(res)
    assert s["strategy"] == "sepl" and s["best_score"] > s["seed_score"]
    run_id = s["run_id"]
    audit = json.loads(evotui("audit", run_id, "--db", str(db), "--json").stdout)
    assert len(audit) == read_rows(db, "SELECT count(*) FROM audit WHERE run_id = ?", run_id)[0][0] > 0
    by_item: dict[str, list[dict]] = {}
    for row in audit:
        by_item.setdefault(row["item_id"], []).append(row)
    proposed = {i for i, p in read_rows(db, "SELECT item_id, payload_json FROM items WHERE run_id = ?", run_id)
                if "proposal" in json.loads(p)}
    assert set(by_item) == proposed  # every proposal is audited, whatever became of it
    accepted = 0
    for item_id, rows in by_item.items():
        kinds = [r["transition"] for r in rows]
        assert kinds[:3] == TRANSITIONS and kinds[-1] == "commit", (item_id, kinds)
        select = rows[1]
        assert select["component"] in ("system", "tool_lookup", "tool_convert", "round_total")
        assert select["reason"].startswith(("blame:", "no component named"))
        assert rows[0]["detail"]["evidence"] and all("feedback" in e for e in rows[0]["detail"]["evidence"])
        commit = rows[-1]
        if commit["decision"] == "accepted":
            accepted += 1
            assert kinds == TRANSITIONS + ["evaluate", "commit"] and rows[3]["decision"] == "passed"
            art = commit["detail"]["artifact_id"]
            assert read_rows(db, "SELECT operator FROM lineage WHERE run_id = ? AND child_id = ?", run_id, art)
            assert list(commit["detail"]["versions"]) == [commit["component"]]
        elif commit["decision"] == "rejected":
            assert rows[-2]["transition"] == "evaluate" and rows[-2]["decision"] == "failed"  # kept with the reason
            assert commit["reason"].startswith("minibatch gate")
    assert accepted == s["accepted"]

    # Versions: the seed's are 1.0.0; each accepted commit's new version is in the history.
    info = _versions(db, run_id)
    assert info["active_artifact"] == s["best_id"]
    history = {n: {v["version"]: v for v in c["versions"]} for n, c in info["components"].items()}
    assert all(h["1.0.0"]["artifact_id"] == "a000000" for h in history.values())
    assert list(history["house"]) == ["1.0.0"]  # frozen: never changes
    for row in audit:
        if row["transition"] == "commit" and row["decision"] == "accepted":
            for name, version in row["detail"]["versions"].items():
                assert history[name][version]["artifact_id"] == row["detail"]["artifact_id"]
    name, versions = max(history.items(), key=lambda kv: len(kv[1]))
    first, last = next(iter(versions)), list(versions)[-1]
    shown = evotui("components", run_id, name, "--diff", first, last, "--db", str(db))
    assert shown.returncode == 0 and f"--- {name}@{first}" in shown.stdout and f"+++ {name}@{last}" in shown.stdout

    # Restore to a component version: the artifact that introduced it becomes the active best.
    target = next((v for v in versions.values() if v["artifact_id"] != s["best_id"]), versions[first])
    res = evotui("restore", run_id, f"{name}@{target['version']}", "--reason", "version restore", "--db", str(db))
    assert res.returncode == 0, res.stderr
    [(aid, detail)] = read_rows(db, "SELECT artifact_id, detail_json FROM pool_events WHERE run_id = ? AND kind = "
                                "'restore'", run_id)
    assert aid == target["artifact_id"] and json.loads(detail)["by"] == "cli"
    restored = _versions(db, run_id)  # nothing was committed since the restore: it is the active one
    assert restored["active_artifact"] == aid and restored["components"][name]["active"] == target["version"]
    for bad, why in ((f"{name}@1.0.999", "has no version"), ("nosuch@1.0.0", "has no component"),
                     ("zz", "has no artifact")):
        out = evotui("restore", run_id, bad, "--db", str(db))
        assert out.returncode == 2 and why in out.stderr and "Traceback" not in out.stderr, out.stderr
    none = evotui("components", run_id, "--diff", "1.0.0", "1.0.1", "--db", str(db))
    assert none.returncode == 2 and "needs a COMPONENT" in none.stderr


NEW_CODE = 'def round_total(x):\n    """Hot-swapped: round to cents."""\n    return round(x, 2)'


def test_hot_swap_through_the_control_socket_survives_kill_and_resume(db):
    proc = subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "run", "agent_tools", "--no-ui", "--mode", "async", "--strategy", "sepl",
         "--db", str(db), "--quiet", "--max-proposals", "400", "--time-scale", "40"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_live("the run row", proc, lambda: db.exists() and bool(read_rows(db, "SELECT run_id FROM runs")))
        run_id = read_rows(db, "SELECT run_id FROM runs")[0][0]
        wait_live("the control socket", proc, socket_path(db, run_id).exists)
        wait_live("the seed", proc, lambda: bool(read_rows(db, "SELECT 1 FROM pool_events WHERE run_id = ?", run_id)))
        frozen = evotui("edit", run_id, "house", "--text", "Say anything.", "--db", str(db))
        assert frozen.returncode == 2 and "frozen" in frozen.stderr and "Traceback" not in frozen.stderr
        unknown = evotui("edit", run_id, "nosuch", "--text", "x", "--db", str(db))
        assert unknown.returncode == 2 and "no component 'nosuch'" in unknown.stderr
        assert not read_rows(db, "SELECT 1 FROM artifacts WHERE run_id = ? AND artifact_id LIKE 'h%'", run_id)
        res = evotui("edit", run_id, "round_total", "--text", NEW_CODE, "--reason", "fix rounding", "--db", str(db))
        assert res.returncode == 0, res.stderr
        assert re.search(r"round_total@\d+\.\d+\.\d+ is active in h", res.stdout), res.stdout
        [(hid, parents, meta)] = read_rows(db, "SELECT artifact_id, parent_ids_json, meta_json FROM artifacts WHERE "
                                           "run_id = ? AND artifact_id LIKE 'h%'", run_id)
        assert json.loads(meta)["hot_swap"] == {"component": "round_total", "by": "control", "reason": "fix rounding"}
        [parent] = json.loads(parents)
        assert read_rows(db, "SELECT parent_id, operator FROM lineage WHERE run_id = ? AND child_id = ?", run_id, hid) == \
            [(parent, "edit")]
        [(detail,)] = read_rows(db, "SELECT detail_json FROM pool_events WHERE run_id = ? AND artifact_id = ? AND "
                                "kind = 'add'", run_id, hid)
        assert json.loads(detail)["component"] == "round_total" and json.loads(detail)["by"] == "control"
        restores = read_rows(db, "SELECT artifact_id, detail_json FROM pool_events WHERE run_id = ? AND kind = 'restore'",
                         run_id)
        assert restores[-1][0] == hid and json.loads(restores[-1][1])["by"] == "control"
        assert json.loads(restores[-1][1])["previous_best"] == parent  # what was active before the edit
        [(decision, component, audit_detail)] = read_rows(
            db, "SELECT decision, component, detail_json FROM audit WHERE run_id = ? AND transition = 'hot_swap'",
            run_id)
        assert (decision, component) == ("committed", "round_total")
        before = _versions(db, run_id)
        swapped = [v for v in before["components"]["round_total"]["versions"] if v["artifact_id"] == hid]
        assert swapped and swapped[0]["text"] == NEW_CODE and json.loads(audit_detail)["version"] == swapped[0]["version"]
        wait_live("items admitted from the edit", proc, lambda: bool(read_rows(
            db, "SELECT 1 FROM items WHERE run_id = ? AND parent_artifact_id = ?", run_id, hid)))
        wait_live("a commit after the hot-swap", proc, lambda: bool(read_rows(
            db, "SELECT 1 FROM pool_events WHERE run_id = ? AND version > (SELECT max(version) FROM pool_events "
                "WHERE run_id = ? AND artifact_id = ?)", run_id, run_id, hid)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    at_kill = _all_versions(_versions(db, run_id))
    assert _all_versions(before) <= at_kill
    res = evotui("resume", run_id, "--db", str(db), "--no-ui", "--quiet", "--max-proposals", "12")
    assert res.returncode == 0, res.stderr[-2000:]
    after = _versions(db, run_id)
    assert at_kill <= _all_versions(after)  # every version kept, same number, same text, same artifact
    assert read_rows(db, "SELECT count(*) FROM audit WHERE run_id = ? AND transition = 'hot_swap'", run_id) == [(1,)]
    done = evotui("edit", run_id, "round_total", "--text", "def round_total(x):\n    return x", "--db", str(db))
    assert done.returncode == 2 and "a hot-swap edits a live run" in done.stderr


def test_sepl_is_refused_where_it_cannot_audit_components(db):
    """Audit is a capability of every mode (tests/engine/test_audit_any_kind.py); a program has no
    components to audit."""
    res = evotui("run", "circle_packing", "--no-ui", "--strategy", "sepl", "--db", str(db), "--max-proposals", "2",
                 *FAST)
    assert res.returncode == 2 and "a program is one text" in res.stderr and "Traceback" not in res.stderr, res.stderr
