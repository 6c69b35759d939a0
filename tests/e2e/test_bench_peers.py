"""`evotui bench --peers`: the real GEPA and OpenEvolve packages as rows beside evotui's modes,
each against a fresh simulated backend on loopback (small budgets here; the figures are in
the bench, not in these tests)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os

import pytest

from evotui import peers
from evotui.bench import run as bench
from tests.e2e.conftest import evotui


def _require(package: str) -> None:
    """CI installs the `peers` extra and sets EVOTUI_REQUIRE_PEERS=1: there a missing one fails."""
    if importlib.util.find_spec(package) is None:
        if os.environ.get("EVOTUI_REQUIRE_PEERS") == "1":
            pytest.fail(f"{package} is not installed but EVOTUI_REQUIRE_PEERS=1 (pip install -e '.[peers]')")
        pytest.skip(f"{package} not installed (the `peers` extra); set EVOTUI_REQUIRE_PEERS=1 to require it")


def _rows(proc) -> dict[str, dict]:
    assert proc.returncode == 0, proc.stderr
    return {r["mode"]: r for r in (json.loads(line) for line in proc.stdout.strip().splitlines())}


def test_real_gepa_rows_beside_evotui_sync():
    _require("gepa")
    proc = evotui("bench", "rules", "--peers", "gepa,gepa-pxn", "--modes", "sync", "--seeds", "1",
                  "--proposals", "4", "--time-scale", "200", "--json", timeout=600)
    rows = _rows(proc)
    assert set(rows) == {"sync", "gepa", "gepa-pxn"}
    gepa, pxn = rows["gepa"], rows["gepa-pxn"]
    assert gepa["peer"] and pxn["peer"] and not rows["sync"]["peer"]
    assert gepa["ratio_vs_gepa"] == 1.0 and pxn["ratio_vs_gepa_pxn"] == 1.0
    assert rows["sync"]["ratio_vs_gepa"] is not None and rows["sync"]["ratio_vs_gepa_pxn"] is not None
    for r in (gepa, pxn):
        run = r["runs"][0]
        # the library ran its own loop: proposals from its reflection, validation on the val set
        assert run["proposals"] >= 4 and run["llm_calls"] > run["proposals"]
        assert r["best_score"] >= r["seed_score"] > 0.0 and r["proposals_per_min"] > 0
        assert 0.0 < r["utilization"] < 1.0 and r["tokens_generated"] > 0
        assert 0.0 < r["heldout_score"] <= 1.0  # GEPA's best_candidate, re-scored as evotui's best is
    assert "PxNSampling(2, 4)" in pxn["settings"] and "merge=off" in rows["sync"]["settings"]
    # quality is paired with the real sequential GEPA when it ran, not with evotui's sync
    assert gepa["heldout_vs"] is None and rows["sync"]["heldout_vs"]["reference"] == "gepa"


def test_real_openevolve_row_on_a_program_task():
    _require("openevolve")
    proc = evotui("bench", "circle_packing", "--peers", "openevolve", "--modes", "sync", "--seeds", "1",
                  "--proposals", "4", "--time-scale", "200", "--json", timeout=600)
    rows = _rows(proc)
    oe = rows["openevolve"]
    run = oe["runs"][0]
    assert run["proposals"] == 4 and 0 <= run["evaluated"] <= 4 and run["llm_calls"] >= 4
    assert oe["seed_score"] == pytest.approx(rows["sync"]["seed_score"], rel=1e-6)  # same evaluator, same sandbox
    assert oe["best_score"] >= oe["seed_score"] and oe["evaluated_per_min"] is not None
    assert oe["heldout_score"] is None and rows["sync"]["heldout_score"] is None  # program scores are not noisy


def test_bad_peer_names_and_kinds_are_refused_clearly():
    unknown = evotui("bench", "rules", "--peers", "gepa,dspy", "--seeds", "1")
    assert unknown.returncode == 2 and "dspy" in unknown.stderr and "gepa-pxn" in unknown.stderr
    wrong = evotui("bench", "circle_packing", "--peers", "gepa", "--seeds", "1")
    assert wrong.returncode == 2 and "prompt task" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_peer_that_is_not_installed_is_skipped_with_a_notice(monkeypatch, capsys):
    monkeypatch.setattr(peers, "installed", lambda peer: peer.name != "gepa-pxn")
    chosen = bench._peers(argparse.Namespace(peers="gepa,gepa-pxn", task="rules"))
    assert [p.name for p in chosen] == ["gepa"]
    err = capsys.readouterr().err
    assert "gepa-pxn skipped" in err and "pip install -e '.[peers]'" in err and len(err.strip().splitlines()) == 1


def test_a_missing_peer_is_named_with_its_own_install_line(monkeypatch, capsys):
    monkeypatch.setattr(peers, "installed", lambda peer: peer.name != "shinka")
    chosen = bench._peers(argparse.Namespace(peers="openevolve,shinka", task="circle_packing"))
    assert [p.name for p in chosen] == ["openevolve"]
    err = capsys.readouterr().err.strip()
    assert err == ("evotui: note: peer row shinka skipped: shinka is not installed "
                   "(pip install -e '.[shinka]' && pip install --no-deps shinka-evolve==0.0.7)")
