"""A run logged to MLflow (local file store) and W&B (offline), killed with SIGKILL and resumed
from the CLI, is one continuous tracked run in each, ending on the summary's numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, evotui, read_rows, summary_of, wait_live
from tests.engine.test_tracking import need, wandb_history, wandb_summary

RUN_TAG = "evotui.run_id"


def _env(tmp_path: Path) -> dict:
    home = str(tmp_path / "home")
    return {**os.environ, "HOME": home, "WANDB_DIR": home, "WANDB_CONFIG_DIR": home, "WANDB_CACHE_DIR": home,
            "WANDB_DATA_DIR": home, "WANDB_ARTIFACT_DIR": home, "WANDB_MODE": "offline", "WANDB_SILENT": "true",
            "MLFLOW_ALLOW_FILE_STORE": "true"}


def _mlflow_steps(mlruns: Path, key: str) -> list[int]:
    """Steps MLflow's file store holds for `key` so far (the run is live: files, not the client)."""
    out = []
    for path in mlruns.glob(f"*/*/metrics/{key}"):
        out += [int(line.split()[2]) for line in path.read_text().splitlines() if len(line.split()) == 3]
    return out


def _rows_so_far(run_dir: Path) -> list[dict]:
    """History rows of a live W&B run (its last record may be half written)."""
    try:
        return [h for h in wandb_history(run_dir) if "proposal" in h]
    except Exception:
        return []


FIRST_BUDGET = 400


def test_killed_and_resumed_run_is_one_tracked_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # this process reads the file store back
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    need("mlflow")
    need("wandb")
    from mlflow.tracking import MlflowClient

    db, cfg = tmp_path / "runs.db", tmp_path / "tracking.toml"
    cfg.write_text('[tracking.mlflow]\nexperiment = "e2e"\n[tracking.wandb]\nproject = "e2e"\nmode = "offline"\n')
    env = _env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--quiet", "--config",
                             str(cfg), "--db", str(db), "--max-proposals", str(FIRST_BUDGET), "--time-scale", "100"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Killed once MLflow and W&B both hold per-proposal rows of the first session.
        wait_live("proposal rows in MLflow", proc, lambda: len(_mlflow_steps(tmp_path / "mlruns", "proposal_attempts")) >= 2)
        wait_live("proposal rows in W&B", proc, lambda: any(_rows_so_far(d) for d in (tmp_path / "wandb").glob("offline-run-*")))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(60)
        proc.stdout.close()
        proc.stderr.close()
    first_steps = _mlflow_steps(tmp_path / "mlruns", "proposal_attempts")
    assert first_steps and max(first_steps) < FIRST_BUDGET
    (run_id,) = [r[0] for r in read_rows(db, "SELECT run_id FROM runs")]
    # The first session cannot end before the kill (its budget is far beyond it, however loaded
    # the machine); the resume ends the run a few proposals after where the kill left it.
    (done,) = read_rows(db, "SELECT count(*) FROM items WHERE json_extract(payload_json, '$.proposal') IS NOT NULL")[0]
    budget = done + 4

    resumed = evotui("resume", run_id, "--db", str(db), "--no-ui", "--quiet", "--max-proposals", str(budget),
                     env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    summary = summary_of(resumed)
    assert summary["status"] == "completed" and summary["proposal_attempts"] >= budget
    assert summary["tracking"]["mlflow"]["failures"] == 0 and summary["tracking"]["wandb"]["failures"] == 0
    assert "tracking:" not in resumed.stderr

    # MLflow: one run for the evotui run, both sessions' rows, ending on the summary's numbers.
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    exp = client.get_experiment_by_name("e2e")
    (run,) = client.search_runs([exp.experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{run_id}'")
    assert run.info.status == "FINISHED"
    assert run.data.params["budget.max_proposals"] == str(FIRST_BUDGET)  # a resume's change is a tag
    mlflow_id = summary["tracking"]["mlflow"]["run_id"]
    assert run.info.run_id == mlflow_id
    for key in ("best_score", "proposal_attempts", "accepted", "llm_calls", "prompt_tokens"):
        history = sorted(client.get_metric_history(mlflow_id, key), key=lambda m: (m.step, m.timestamp))
        assert history[-1].step == summary["proposal_attempts"]
        assert history[-1].value == pytest.approx(summary[key]), key
    steps = {m.step for m in client.get_metric_history(mlflow_id, "proposal_attempts")}
    assert set(first_steps) <= steps  # the first session's rows are in the same run
    assert {a.path for a in client.list_artifacts(mlflow_id)} == {"best", "evotrace"}
    best = json.loads(Path(client.download_artifacts(mlflow_id, "best/best.json", str(tmp_path))).read_text())
    assert best["artifact_id"] == summary["best_id"]

    # W&B offline: a folder per session under one run id; the history continues the proposal count.
    run_dirs = sorted((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))
    assert len(run_dirs) == 2
    before, after = (wandb_history(d) for d in run_dirs)
    assert before and after
    last_before = max(h["proposal"] for h in before if "proposal" in h)
    assert last_before < FIRST_BUDGET and min(h["proposal"] for h in after if "proposal" in h) >= last_before
    final = [h for h in after if h.get("proposal") == summary["proposal_attempts"] and "best_score" in h][-1]
    assert final["best_score"] == pytest.approx(summary["best_score"])
    assert wandb_summary(run_dirs[-1])["best_score"] == pytest.approx(summary["best_score"])
