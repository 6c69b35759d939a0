"""`evotui analyze`'s held-out section end to end: circle_packing's held-out evaluator agrees with
an honest simulated run (aligned), a held-out evaluator that punishes the public gain labels the
same kind of run severe overfit, and the rules task's held-out split is scored by the task model
once (a second analyze reads the cache)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of

ROOT = Path(__file__).resolve().parents[2]
# Public score up, held-out score down: sum of radii mirrored around the seed's 0.6355.
PUNISHING = '''import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("main_evaluator", __file__.replace("heldout_evaluator.py", "evaluator.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.evaluate(program_path)
    return {"combined_score": 1.271 - out["combined_score"]}
'''


def _run(task: str, db: Path, n: str) -> str:
    proc = evotui("run", task, "--no-ui", "--db", str(db), "--max-proposals", n, "--seed", "2", *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return summary_of(proc)["run_id"]


def _heldout(db: Path, run_id: str, *extra: str) -> dict:
    proc = evotui("analyze", run_id, "--db", str(db), "--json", *extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)["heldout"]


def test_program_task_aligned_and_severe(tmp_path: Path) -> None:
    db = tmp_path / "cp.db"
    run_id = _run("circle_packing", db, "15")
    h = _heldout(db, run_id, "--no-judge")
    assert h["available"] and h["kind"] == "program" and h["chain"][0]["proposal"] == 0
    assert h["public_gain"] > 0 and h["label"] == "aligned" and h["retained"] >= 0.5
    text = evotui("analyze", run_id, "--db", str(db), "--no-judge").stdout
    assert "HELD-OUT" in text

    task = tmp_path / "cp_punish"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    (task / "heldout_evaluator.py").write_text(PUNISHING)
    db2 = tmp_path / "punish.db"
    run2 = _run(str(task), db2, "15")
    h2 = _heldout(db2, run2, "--no-judge")
    assert h2["public_gain"] > 0 and h2["label"] == "severe overfit" and h2["retained"] < 0

    (task / "heldout_evaluator.py").unlink()
    h3 = _heldout(db2, run2, "--no-judge")
    assert not h3["available"] and "no held-out evaluator" in h3["reason"]


def test_prompt_task_split_is_scored_once(tmp_path: Path) -> None:
    db = tmp_path / "rules.db"
    run_id = _run("rules", db, "8")
    first = _heldout(db, run_id)
    assert first["available"] and first["kind"] == "prompt" and first["llm_calls"] == 30 * len(first["chain"])
    assert first["label"] in ("aligned", "mild overfit", "severe overfit", "no gain")
    second = _heldout(db, run_id)
    assert second["llm_calls"] == 0 and second["cached"] == first["llm_calls"]
    assert [s["heldout"] for s in second["chain"]] == [s["heldout"] for s in first["chain"]]
    skipped = _heldout(db, run_id, "--no-judge")
    assert not skipped["available"] and "--no-judge" in skipped["reason"]
