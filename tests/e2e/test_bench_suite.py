"""`evotui bench --suite`: the declared suite runs end to end on the simulated backend.

The ci suite is what CI runs so the bench cannot rot: every task kind (rules, overrides,
circle_packing, heilbronn), evotui's sync and default modes and the best-of-N row, two seeds,
a zero-latency backend (seconds; its figures show the code path, not speed)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from evotui.bench.suite import SUITES_FILE, load
from tests.e2e.conftest import evotui


def _json_rows(proc) -> list[dict]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.strip().splitlines()]


def test_ci_suite_reports_every_task_and_row(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    rows = _json_rows(evotui("bench", "--suite", "ci", "--json", "--out", str(out), timeout=900))
    _, suite, records = load("ci")
    assert {(r["task"], r["row"]) for r in rows} == {(t.name, row) for t in suite.tasks for row in t.rows}
    full = {(r["task"], r["row"]): r for r in json.loads(out.read_text())}
    for r in rows:
        task = next(t for t in suite.tasks if t.name == r["task"])
        assert r["seeds"] == 2 and r["zero_latency"] and r["record"] == records[r["task"]].model_dump()
        runs = full[(r["task"], r["row"])]["runs"]
        assert [run["seed"] for run in runs] == [0, 1]
        assert all(0 < run["evaluated"] <= task.proposals for run in runs)
        assert r["best"] == statistics.median(run["best_score"] for run in runs)
        # every task has a held-out split or evaluator, so every row has a held-out score
        assert r["heldout"] is not None and all(run["heldout_score"] is not None for run in runs)
        if r["row"] == task.reference:
            assert r["ratio_vs_reference"] == 1.0 and r["heldout_vs_reference"] is None
            continue
        ref = {run["seed"]: run for run in full[(r["task"], task.reference)]["runs"]}
        diffs = [run["heldout_score"] - ref[run["seed"]]["heldout_score"] for run in runs]
        paired = r["heldout_vs_reference"]
        assert paired["seeds"] == 2 and paired["mean_diff"] == statistics.mean(diffs)
        assert paired["se"] == statistics.stdev(diffs) / 2 ** 0.5
        assert paired["better"] + paired["worse"] + paired["tied"] == 2
    # the best-of-N row proposes from the seed every time: evaluated all its proposals, no child as parent
    bon = full[("rules", "best-of-n")]["runs"][0]
    assert bon["settings"].startswith("mode=sync") and bon["accepted"] == bon["proposals"]


def test_suite_over_loopback_reaches_a_sim_server(tmp_path: Path) -> None:
    """Equal transport: evotui's rows go over HTTP to a fresh `evotui sim-server`, as the peers' do,
    timed by that server's virtual clock (the bench's default), as the peers' are."""
    suite = tmp_path / "tiny.toml"
    suite.write_text('[suite.tiny]\ndescription = "loopback"\nseeds = 1\nfirst_seed = 5\ntime_scale = 400\n'
                     'tasks = [{ name = "overrides", proposals = 3, rows = ["sync", "best-of-n"] }]\n')
    out = tmp_path / "tiny.json"
    rows = _json_rows(evotui("bench", "--suite", str(suite), "--json", "--out", str(out), timeout=600))
    assert [r["row"] for r in rows] == ["sync", "best-of-n"]
    for r in json.loads(out.read_text()):
        [run] = r["runs"]
        assert run["seed"] == 5  # first_seed: a later run extends an earlier sample
        assert run["transport"] == "loopback" and run["clock"] == "virtual"
        assert run["utilization"] > 0  # read from the server, there being no in-process simulator
        assert r["evaluated_per_min"] > 0 and r["record"]["value"] > 0  # the built-in record, from suites.toml


def test_bad_suite_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = {"--suite nosuch": "no suite 'nosuch'", "--suite ci --suite-tasks warp": "warp not in suite ci",
             "--suite ci --suite-seeds 0": "--suite-seeds must be at least 1"}
    bad = tmp_path / "bad.toml"
    bad.write_text('[suite.x]\ndescription = "d"\nseeds = 1\ntasks = [{ name = "rules", proposals = 2, rows = ["sync", "warp"] }]\n')
    cases[f"--suite {bad}"] = "unknown row 'warp'"
    wrong_kind = tmp_path / "kind.toml"
    wrong_kind.write_text('[suite.x]\ndescription = "d"\nseeds = 1\n'
                          'tasks = [{ name = "rules", proposals = 2, rows = ["sync", "openevolve"] }]\n')
    cases[f"--suite {wrong_kind}"] = "peer row openevolve runs program tasks"
    lone = tmp_path / "lone.toml"
    lone.write_text('[suite.x]\ndescription = "d"\nseeds = 1\n'
                    'tasks = [{ name = "heilbronn", proposals = 2, rows = ["sync"], eval_concurrency = 4 }]\n')
    cases[f"--suite {lone}"] = "eval_concurrency applies with slow_stage_cpu_s"
    slow_prompt = tmp_path / "slow.toml"
    slow_prompt.write_text('[suite.x]\ndescription = "d"\nseeds = 1\n'
                           'tasks = [{ name = "rules", proposals = 2, rows = ["sync"], slow_stage_cpu_s = 1 }]\n')
    cases[f"--suite {slow_prompt}"] = "slow_stage_cpu_s needs a native program task"
    typo = tmp_path / "typo.toml"
    typo.write_text('[suite.x]\ndescription = "d"\nseed = 1\ntasks = []\n')
    cases[f"--suite {typo}"] = "suite.x.seed"
    for argv, message in cases.items():
        proc = evotui("bench", *argv.split())
        assert proc.returncode == 2, (argv, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (argv, proc.stderr)


def test_builtin_suites_are_valid_and_name_real_tasks() -> None:
    from evotui.bench.suite import check

    text = SUITES_FILE.read_text()
    for name in ("ci", "prompt", "program", "quick"):
        assert f"[suite.{name}]" in text
        _, suite, records = load(name)
        check(suite)  # raises SuiteError on an unknown task, row or reference
        assert all(t.name in records for t in suite.tasks)


def test_a_slow_cascade_variant_is_the_task_behind_a_cascade(tmp_path: Path) -> None:
    """cascade_variant: stage 1 is the task's own evaluation, stage 2 spends the CPU time and
    returns the same result; the copy's limits leave room for it."""
    import asyncio

    from engine.sandbox import Sandbox
    from engine.tasks.loader import load_any_task
    from evotui.bench.cascade_variant import slow_variant

    folder = slow_variant("heilbronn", 0.3, tmp_path, eval_concurrency=5)
    task, original = load_any_task(str(folder)), load_any_task("heilbronn")
    assert task.settings.cascade and task.settings.eval_concurrency == 5
    assert task.settings.eval_timeout_s == original.settings.eval_timeout_s * 2 + 0.3 * 5
    assert slow_variant("heilbronn", 0.3, tmp_path, eval_concurrency=5) == folder  # made once
    sandbox = Sandbox(task.settings.limits(), scratch_root=tmp_path)
    stages: list[dict] = []
    res = asyncio.run(sandbox.evaluate(task.evaluator, task.initial_program, cascade=True, on_stage=stages.append))
    plain = asyncio.run(Sandbox(original.settings.limits(), scratch_root=tmp_path).evaluate(
        original.evaluator, original.initial_program))
    assert res.ok and res.score == plain.score and [s["name"] for s in res.stages] == ["evaluate_stage1",
                                                                                      "evaluate_stage2"]
    assert stages == [{"name": "evaluate_stage1", "score": plain.score, "index": 0, "of": 2}]
