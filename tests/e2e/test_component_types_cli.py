"""Typed components from the CLI (issue 15 item 1): a bad type is a config error (exit 2), a
hot-swap that breaks a frozen region or the type's syntax is refused (exit 2, nothing written),
`evotui components` shows types and frozen regions, and kill -9 + resume keeps them in the rows."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from evotui.control import socket_path
from tests.e2e.conftest import FAST, ROOT, evotui, summary_of, wait_live, read_rows


def _rules(db: Path, run_id: str) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(artifact, component, type, frozen regions) of every stored artifact's components."""
    return {(aid, c["name"], c["type"], tuple(c["frozen"]))
            for aid, parts in read_rows(db, "SELECT artifact_id, components_json FROM artifacts WHERE run_id = ?", run_id)
            for c in json.loads(parts)}


def test_an_unknown_type_is_a_config_error(tmp_path: Path, db: Path):
    task = tmp_path / "agent_copy"
    shutil.copytree(ROOT / "tasks" / "agent_tools", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace('type = "tool_code"', 'type = "python"'))
    res = evotui("run", str(task), "--no-ui", "--db", str(db), *FAST)
    assert res.returncode == 2, res.stderr
    assert "component 'round_total': unknown type 'python'; allowed types: prompt, tool_description, tool_code, " \
           "agent_config, text" in res.stderr
    assert "Traceback" not in res.stderr


def test_hot_swap_refusals_components_view_and_kill_resume_keep_the_types(db: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "run", "agent_tools", "--no-ui", "--mode", "async", "--db", str(db),
         "--quiet", "--max-proposals", "400", "--time-scale", "40"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_live("the run row", proc, lambda: db.exists() and bool(read_rows(db, "SELECT run_id FROM runs")))
        run_id = read_rows(db, "SELECT run_id FROM runs")[0][0]
        wait_live("the control socket", proc, socket_path(db, run_id).exists)
        wait_live("the seed", proc, lambda: bool(read_rows(db, "SELECT 1 FROM pool_events WHERE run_id = ?", run_id)))
        region = evotui("edit", run_id, "round_total", "--text", "def total(x):\n    return round(x, 2)",
                        "--db", str(db))
        assert region.returncode == 2 and "Traceback" not in region.stderr
        assert "component [round_total] drops or alters frozen region 1 `def round_total(x):`" in region.stderr
        syntax = evotui("edit", run_id, "round_total", "--text", "def round_total(x):\n    return round(x, 2",
                        "--db", str(db))
        assert syntax.returncode == 2 and "component [round_total] is not valid Python (line 2" in syntax.stderr
        assert not read_rows(db, "SELECT 1 FROM artifacts WHERE run_id = ? AND artifact_id LIKE 'h%'", run_id)
        wait_live("a committed child", proc, lambda: bool(read_rows(
            db, "SELECT 1 FROM artifacts WHERE run_id = ? AND status = 'confirmed' AND artifact_id != 'a000000'",
            run_id)))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    at_kill = _rules(db, run_id)
    assert ("a000000", "round_total", "tool_code", ("def round_total(x):",)) in at_kill
    res = evotui("resume", run_id, "--db", str(db), "--no-ui", "--quiet", "--max-proposals", "12")
    assert res.returncode == 0, res.stderr[-2000:]
    assert summary_of(res)["status"] == "completed"
    after = _rules(db, run_id)
    assert at_kill <= after and len({a for a, *_ in after}) > len({a for a, *_ in at_kill})
    expected = {"system": ("prompt", ()), "tool_lookup": ("tool_description", ()),
                "tool_convert": ("tool_description", ()), "round_total": ("tool_code", ("def round_total(x):",)),
                "house": ("text", ())}
    assert {(name, type_, frozen) for _, name, type_, frozen in after} == \
        {(name, t, f) for name, (t, f) in expected.items()}
    view = evotui("components", run_id, "--db", str(db))
    assert view.returncode == 0, view.stderr
    assert any(line.startswith("round_total: ") and line.endswith("type tool_code, 1 frozen region(s)")
               for line in view.stdout.splitlines()), view.stdout
    assert any(line.startswith("house: ") and "type text, 0 frozen region(s)" in line
               for line in view.stdout.splitlines()), view.stdout
    info = json.loads(evotui("components", run_id, "--db", str(db), "--json").stdout)
    assert {n: (c["type"], c["frozen_regions"]) for n, c in info["components"].items()} == \
        {n: (t, len(f)) for n, (t, f) in expected.items()}
