"""The contextevolve strategy end to end, through the CLI on the simulated backend: it improves on
the seed of circle packing, its agents' notes (summary, guidance, exemplars) reach the committed
children, and a stopped run resumes with the same strategy, keeping every child's notes."""

import json
import sqlite3

from tests.e2e.conftest import FAST, evotui, summary_of


def _notes(db) -> dict[str, dict]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT artifact_id, meta_json FROM artifacts WHERE status != 'seed' "
                           "ORDER BY created_version").fetchall()
    finally:
        con.close()
    return {aid: json.loads(meta).get("notes", {}) for aid, meta in rows}


def test_contextevolve_improves_on_the_seed_and_its_children_carry_the_agents_notes(db):
    # Mode sync: the same seed gives the same run item by item, so the improvement asserted
    # below does not depend on how the machine schedules concurrent items (in async, a loaded
    # machine once ended 30 proposals without one).
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--strategy", "contextevolve",
                  "--max-proposals", "30", "--mode", "sync", *FAST, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["strategy"] == "contextevolve" and s["status"] == "completed" and s["proposal_attempts"] == 30
    assert s["best_score"] > s["seed_score"]
    by_stage = s["llm_by_stage"]  # what each agent costs per proposal (the TUI's LLM tab shows the same)
    assert {"propose", "summarize", "navigate"} <= set(by_stage)
    assert sum(v["calls"] for v in by_stage.values()) == s["llm_calls"]
    assert sum(v["tokens"] for v in by_stage.values()) == s["prompt_tokens"] + s["completion_tokens"]
    notes = _notes(db)
    assert notes and all(n["summary"].startswith("NEW:") and "PRESERVES:" in n["summary"] for n in notes.values())
    guided = [n for n in notes.values() if "guidance" in n]
    assert guided and all(n["guidance_version"].isdigit() for n in guided)
    assert any(n.get("exemplars", "").startswith("- a") for n in notes.values())


def test_stop_and_resume_keep_the_strategy_and_the_summaries(db, tmp_path):
    config = tmp_path / "ce.toml"
    config.write_text('[strategy]\nname = "contextevolve"\n[strategy.contextevolve]\nselection = "islands"\n'
                      'guidance_refresh = 2\n[strategy.loongflow]\nislands = 2\n')
    first = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--config", str(config),
                   "--max-proposals", "10", *FAST, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    s1 = summary_of(first)
    assert s1["strategy"] == "contextevolve"
    before = _notes(db)
    again = evotui("resume", s1["run_id"], "--no-ui", "--db", str(db), "--max-proposals", "24", "--quiet", timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    s2 = summary_of(again)
    assert s2["strategy"] == "contextevolve" and s2["status"] == "completed" and s2["proposal_attempts"] == 24
    after = _notes(db)
    assert len(after) > len(before)
    assert all(after[aid] == notes for aid, notes in before.items())  # summaries and guidance kept exactly
    assert all("PRESERVES:" in n["summary"] for n in after.values())
    assert s2["best_score"] >= s1["best_score"]


def test_strategies_lists_contextevolve():
    proc = evotui("strategies", "-v")
    assert proc.returncode == 0
    assert "contextevolve" in proc.stdout and "Navigator" in proc.stdout


def test_a_bad_contextevolve_selection_is_a_clear_error(db, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[strategy.contextevolve]\nselection = "roulette"\n')
    proc = evotui("run", "circle_packing", "--no-ui", "--db", str(db), "--strategy", "contextevolve",
                  "--config", str(config), *FAST)
    assert proc.returncode == 2
    assert "strategy.contextevolve.selection" in proc.stderr and "Traceback" not in proc.stderr
