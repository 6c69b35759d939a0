"""`evotui bench` prints both modes side by side from one command (small and fast here)."""

import json

from tests.e2e.conftest import evotui


def test_bench_json_has_each_mode_and_ratio():
    proc = evotui("bench", "rules", "--profile", "vllm", "--seeds", "1", "--proposals", "4", "--time-scale", "400", "--json",
                  timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    by_mode = {r["mode"]: r for r in rows}
    assert set(by_mode) == {"sync", "async"}
    for r in rows:
        for key in ("proposals_per_min", "ratio_vs_sync", "best_score", "tokens_generated", "utilization"):
            assert r[key] is not None, key
        assert r["simulated"] is True and r["runs"][0]["proposals"] <= 4
    assert by_mode["sync"]["ratio_vs_sync"] == 1.0
    assert by_mode["async"]["proposals_per_min"] > 0


def test_bench_table_and_bad_mode():
    bad = evotui("bench", "--modes", "sync,warp", "--seeds", "1")
    assert bad.returncode == 2 and "warp" in bad.stderr and "Traceback" not in bad.stderr
