"""`evotui sim-server --answers-from DB`: a run's recorded replies served again to the same
requests, so a second run does the same work on the simulator's timing (sim-calibrate --check)."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx

from tests.e2e.conftest import ROOT, evotui, free_port, serve_sim, summary_of

RUN = ["rules", "--mode", "sync", "--seed", "3", "--max-proposals", "4", "--no-ui", "--quiet"]


def _run_against(url: str, db: Path) -> tuple[dict, dict]:
    proc = evotui("run", *RUN, "--db", str(db), "--llm-url", f"{url}/v1", "--model", "sim-qwen3-8b")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return summary_of(proc), httpx.get(f"{url}/v1/sim/metrics", timeout=5).json()


def _replies(db: Path) -> list[str]:
    from engine.store.texts import recorded_replies

    return [reply for _, reply, *_ in recorded_replies(db)]


def test_a_run_served_its_recorded_replies_repeats_its_work(tmp_path: Path):
    recorded = tmp_path / "recorded.db"
    proc = evotui("run", *RUN, "--db", str(recorded))
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = summary_of(proc)
    for answers, db in ((["--answers-from", str(recorded)], tmp_path / "replayed.db"), ([], tmp_path / "own.db")):
        server, url = serve_sim("--time-scale", "2000", "--seed", "99", *answers)
        try:
            summary, metrics = _run_against(url, db)
        finally:
            server.terminate()
            server.wait(timeout=10)
            server.stderr.close()
        if answers:  # every request was one the recorded run made, answered as it was then
            assert metrics["replay_missed"] == 0 and metrics["replay_matched"] == metrics["requests_served"] > 4
            assert sorted(_replies(db)) == sorted(_replies(recorded))  # a step's calls finish in any order
            assert summary["best_score"] == first["best_score"] and summary["llm_calls"] == first["llm_calls"]
        else:  # the control: the server's own answers (another seed) differ, so the match above is the replay's
            assert "replay_matched" not in metrics and sorted(_replies(db)) != sorted(_replies(recorded))


def test_a_database_without_texts_is_one_line_and_exit_2(tmp_path: Path):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    for db, says in ((tmp_path / "missing.db", "cannot open"), (empty, "not an evotui database")):
        out = subprocess.run([sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(free_port()),
                              "--answers-from", str(db)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
