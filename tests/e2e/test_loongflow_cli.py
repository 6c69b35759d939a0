"""The loongflow strategy end to end, through the CLI on the simulated backend: it improves on the
seed on a prompt task and both program tasks, its picks' islands reach the committed children,
and a stopped run resumes with the same strategy and islands."""

import json
import sqlite3

import pytest

from tests.e2e.conftest import FAST, evotui, summary_of


def _selections(db) -> list[dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT meta_json FROM artifacts WHERE status != 'seed' ORDER BY created_version").fetchall()
    finally:
        con.close()
    return [json.loads(meta).get("selection", {}) for (meta,) in rows]


@pytest.mark.parametrize("task, proposals", [("rules", 24), ("circle_packing", 30), ("heilbronn", 30)])
def test_loongflow_improves_on_the_seed(db, task, proposals):
    # Mode sync: the same run item by item however the machine is loaded (the improvement
    # asserted below cannot hang on how concurrent items interleave).
    proc = evotui("run", task, "--no-ui", "--db", str(db), "--strategy", "loongflow", "--max-proposals",
                  str(proposals), "--mode", "sync", *FAST, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["strategy"] == "loongflow" and s["status"] == "completed"
    assert s["proposal_attempts"] == proposals and s["merges_tried"] == 0
    assert s["best_score"] > s["seed_score"]
    islands = {sel["island"] for sel in _selections(db)}
    assert islands <= {0, 1, 2} and len(islands) >= 2  # every child carries the island it was picked in


def test_stop_and_resume_keep_the_strategy_and_its_islands(db, tmp_path):
    config = tmp_path / "lf.toml"
    config.write_text('[strategy]\nname = "loongflow"\n[strategy.loongflow]\nislands = 2\nmigration_interval = 3\n'
                      'temperature_rule = "released_code"\n')
    first = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--config", str(config),
                   "--max-proposals", "8", *FAST, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    s1 = summary_of(first)
    assert s1["strategy"] == "loongflow"
    before = len(_selections(db))
    again = evotui("resume", s1["run_id"], "--no-ui", "--db", str(db), "--max-proposals", "20", "--quiet", timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    s2 = summary_of(again)
    assert s2["strategy"] == "loongflow" and s2["status"] == "completed" and s2["proposal_attempts"] == 20
    after = _selections(db)
    assert len(after) > before
    # The resumed run still has the config's two islands (its picks name no third).
    assert {sel["island"] for sel in after} == {0, 1}
    assert s2["best_score"] >= s1["best_score"]


def test_strategies_lists_loongflow():
    proc = evotui("strategies", "-v")
    assert proc.returncode == 0
    assert "loongflow" in proc.stdout and "Boltzmann" in proc.stdout


def test_bad_loongflow_config_is_a_clear_error(db, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[strategy.loongflow]\nislands = 0\n')
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--strategy", "loongflow", "--config", str(config), *FAST)
    assert proc.returncode == 2
    assert "strategy.loongflow.islands" in proc.stderr and "Traceback" not in proc.stderr
    assert not db.exists()


def test_show_reports_the_islands_and_the_pes_notes_of_a_loongflow_run(db):
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--strategy", "loongflow",
                  "--max-proposals", "12", *FAST, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = evotui("show", "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    info = json.loads(shown.stdout)
    islands = info["islands"]
    assert [isl["island"] for isl in islands] == [0, 1, 2]
    for isl in islands:
        assert isl["size"] >= 1 and isl["cells"] and isl["temperature"] > 0
        assert isl["best_score"] == max(c["score"] for c in isl["cells"])  # a cell keeps its best
    assert max(isl["best_score"] for isl in islands) == info["best_score"]
    pes = info["pes"]
    assert pes["plans"] + pes["plan_fallbacks"] == info["artifacts"] - 1  # every child was planned
    assert pes["summaries"] > 0
    human = evotui("show", "--db", str(db))
    assert "islands" in human.stdout and "0: best" in human.stdout and "Traceback" not in human.stderr
