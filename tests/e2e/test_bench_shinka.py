"""The `shinka` peer row: real ShinkaEvolve (its asynchronous runner, unchanged) on circle_packing
against a fresh `evotui sim-server`, its programs scored in evotui's sandbox.

ShinkaEvolve 0.0.7 pins httpx==0.27 against evotui's httpx>=0.28, so it is not in the `peers`
extra CI installs (pyproject.toml, `shinka` extra): these tests skip without it unless
EVOTUI_REQUIRE_SHINKA=1, which makes a missing package fail.

The run's server keeps the wall clock (simulated time = wall x scale): Shinka's job monitor wakes
every 0.1 s, and on a loaded machine the virtual clock sees its process busy at nearly every look,
so it seldom jumps over a request's latency and the run's length would follow the machine's load.
What is checked here does not depend on the clock: the row's minutes are the server's `sim_now`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from engine.sandbox.core import Sandbox
from engine.tasks.loader import load_any_task
from evotui import peers
from evotui.bench import peers as bench_peers
from evotui.peers.sim_endpoint import SimEndpoint
from tests.e2e.conftest import ROOT

PROPOSALS = 4


def _require_shinka() -> None:
    if importlib.util.find_spec("shinka") is None:
        if os.environ.get("EVOTUI_REQUIRE_SHINKA") == "1":
            pytest.fail("shinka is not installed but EVOTUI_REQUIRE_SHINKA=1 (" + peers.PEERS["shinka"].install + ")")
        pytest.skip("shinka not installed (" + peers.PEERS["shinka"].install + "); "
                    "set EVOTUI_REQUIRE_SHINKA=1 to require it")


def test_shinka_row_evaluates_proposals_and_returns_its_best_program(tmp_path):
    _require_shinka()
    task = load_any_task("circle_packing")
    with SimEndpoint("vllm", 0, 200, clock="wall") as sim:
        before = sim.metrics()["sim_now"]
        proc = subprocess.run([sys.executable, "-m", "evotui.peers.child", "shinka", "circle_packing", "--url", sim.url,
                               "--seed", "0", "--proposals", str(PROPOSALS), "--time-scale", "200"],
                              check=False, capture_output=True, text=True, timeout=900, cwd=ROOT,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
        served = sim.metrics()
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout[-2000:]  # Shinka's banner and tables stay off stdout
    row = json.loads(lines[0])
    # Shinka ran its own loop: every generation past the initial program sent the model a request
    # and every program it produced went through the task's evaluator.
    assert row["proposals"] == PROPOSALS and 1 <= row["evaluated"] <= PROPOSALS
    assert served["requests_served"] >= PROPOSALS
    # The seed scores as evotui scores it (same evaluator, same sandbox).
    seed = asyncio.run(Sandbox(task.settings.limits(), concurrency=1).evaluate(
        task.evaluator, task.initial_program, mode=task.sandbox_mode))
    assert row["seed_score"] == pytest.approx(seed.score, rel=1e-9)
    # The returned best program is what the task's evaluator scores at the reported best.
    best = asyncio.run(Sandbox(task.settings.limits(), concurrency=1).evaluate(
        task.evaluator, row["best_text"], mode=task.sandbox_mode))
    assert best.ok and best.score == pytest.approx(row["best_score"], rel=1e-9)
    assert row["best_score"] >= row["seed_score"]
    # Minutes by the server's clock: inside the window the server measured, not longer.
    assert 0.0 < row["pipeline_minutes"] <= row["run_minutes"] <= (served["sim_now"] - before) / 60.0
    assert row["wall_s"] > 0.0


def test_a_missing_shinka_fails_the_row_with_one_line(monkeypatch):
    monkeypatch.setattr(peers, "installed", lambda peer: peer.name != "shinka")
    with pytest.raises(bench_peers.PeerFailed) as failed:
        bench_peers.run_peer(peers.PEERS["shinka"], "circle_packing", 0, "vllm", 2, 200.0)
    message = str(failed.value)
    assert "\n" not in message and "shinka" in message and "--no-deps shinka-evolve==0.0.7" in message


def test_shinka_is_a_program_peer():
    assert [p.name for p in peers.parse("shinka,openevolve", "program")] == ["shinka", "openevolve"]
    with pytest.raises(ValueError, match="openevolve or shinka with a program task"):
        peers.parse("shinka", "prompt")
