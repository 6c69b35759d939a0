"""`evotui bench` prints both modes side by side from one command (small and fast here)."""

import json

from engine.config import build_config
from evotui.bench.run import settings
from evotui.bench.modes import MODES
from tests.e2e.conftest import evotui


def test_bench_json_has_each_mode_and_ratio():
    proc = evotui("bench", "rules", "--profile", "vllm", "--seeds", "1", "--proposals", "4", "--time-scale", "400", "--json",
                  "--modes", "sync,pxn,async-reflective,chain,async-max",
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    by_mode = {r["mode"]: r for r in rows}
    assert set(by_mode) == {"sync", "pxn", "async-reflective", "chain", "async-max"}
    for r in rows:
        for key in ("proposals_per_min", "ratio_vs_sync", "ratio_vs_pxn", "best_score", "tokens_generated",
                    "tokens_wasted", "utilization", "throughput_utilization"):
            assert r[key] is not None, key
        assert r["simulated"] is True and r["runs"][0]["proposals"] <= 4
        # the final best re-scored on the held-out split, in [0, 1], with its spread
        assert 0.0 <= r["heldout_score_min"] <= r["heldout_score"] <= r["heldout_score_max"] <= 1.0
    # held-out quality paired by seed against the sequential reference (sync: no GEPA row here)
    assert by_mode["sync"]["heldout_vs"] is None
    paired = by_mode["chain"]["heldout_vs"]
    assert paired["reference"] == "sync" and paired["seeds"] == 1 and paired["se"] is None
    assert paired["mean_diff"] == by_mode["chain"]["heldout_score"] - by_mode["sync"]["heldout_score"]
    assert paired["better"] + paired["worse"] + paired["tied"] == 1
    assert by_mode["sync"]["ratio_vs_sync"] == 1.0
    assert by_mode["pxn"]["ratio_vs_pxn"] == 1.0
    assert by_mode["async-reflective"]["proposals_per_min"] > 0


def test_bench_table_and_bad_mode():
    bad = evotui("bench", "--modes", "sync,warp", "--seeds", "1")
    assert bad.returncode == 2 and "warp" in bad.stderr and "Traceback" not in bad.stderr


def test_bench_zero_latency_reports_engine_rate():
    proc = evotui("bench", "--zero-latency", "--proposals", "10", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["llm_calls"] > 10 and row["llm_calls_per_s"] > 0 and row["proposals"] <= 10


def test_bench_strategies_reports_each_strategy_and_mode():
    proc = evotui("bench", "circle_packing", "--strategies", "openevolve,loongflow", "--seeds", "1", "--proposals", "3",
                  "--time-scale", "2000", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert {(r["strategy"], r["mode"]) for r in rows} == {(s, m) for s in ("openevolve", "loongflow")
                                                         for m in ("sync", "async")}
    best = max(b for r in rows for b in r["best"])
    for r in rows:
        assert r["target"] == 0.9 * best and r["runs"] == 1 and r["proposals_per_min"][0] > 0
        assert r["reached"] == len(r["evals_to_target"]) and all(0 <= n <= r["metric_calls"][0]
                                                                 for n in r["evals_to_target"])
    bad = evotui("bench", "circle_packing", "--strategies", "loongflow,nope", "--seeds", "1")
    assert bad.returncode == 2 and "nope" in bad.stderr and "Traceback" not in bad.stderr


def test_best_at_equal_tokens_uses_the_thriftiest_run_of_each_seed():
    from evotui.bench import strategies as bs

    thrifty = {"seed": 0, "token_trace": [(0, 0.5), (100, 0.6), (300, 0.7)]}
    costly = {"seed": 0, "token_trace": [(0, 0.5), (250, 0.9), (400, 0.95)]}
    other_seed = {"seed": 1, "token_trace": [(0, 0.4), (50, 0.8)]}
    results = {("a", "sync"): [thrifty, other_seed], ("b", "sync"): [costly]}
    bs.add_equal_token_scores(results)
    # seed 0 stops at 300 tokens (the thrifty run's total): the costly run's 0.9 at 250 counts, 0.95 does not
    assert thrifty["best_at_equal_tokens"] == 0.7 and costly["best_at_equal_tokens"] == 0.9
    assert other_seed["best_at_equal_tokens"] == 0.8  # alone in its seed: its own total
    assert bs.best_within([(10, 0.3)], 5) is None


def test_held_out_scores_are_compared_seed_by_seed_with_the_sequential_reference():
    from evotui.bench import report

    def runs(mode: str, scores: dict[int, float | None]) -> list[dict]:
        return [{"mode": mode, "seed": seed, "heldout_score": v} for seed, v in scores.items()]

    gepa = runs("gepa", {0: 0.90, 1: 0.80, 2: 0.70, 4: 0.50})
    # seed 3 has no reference score and seed 4 no score of its own: both are left out
    chain = runs("chain-8", {0: 0.95, 1: 0.75, 2: 0.70, 3: 0.99, 4: None})
    p = report.paired_heldout(chain, gepa)
    assert p["seeds"] == 3 and (p["better"], p["worse"], p["tied"]) == (1, 1, 1)
    assert abs(p["mean_diff"] - 0.0) < 1e-12
    assert abs(p["se"] - 0.05 / 3 ** 0.5) < 1e-12  # differences +0.05, -0.05, 0: sd 0.05
    assert report.paired_heldout(runs("x", {7: 0.9}), gepa) is None  # no seed in common
    rows = [{"mode": "chain-8", "heldout_vs": {"reference": "gepa", **p}}, {"mode": "gepa", "heldout_vs": None}]
    assert report.paired_lines(rows) == [
        "held-out vs gepa, paired by seed: mean difference +- standard error (seeds better/worse/tied)",
        "  chain-8           +0.000  +- 0.029  (1/1/1)"]


def test_the_bench_states_a_fixed_or_an_adapting_chain_count():
    def stated(mode: str) -> str:
        return settings(build_config([("bench", MODES[mode])]).pipeline)

    assert "chains=8 " in stated("chain-8") and ".." not in stated("chain-8")
    assert "chains=6..10 (grow after 3 clean steps)" in stated("chain-6to10")
