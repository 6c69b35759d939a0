"""OpenEvolve's config.yaml as an OpenEvolve user means it: llm.api_base names the endpoint the
run talks to, OpenEvolve's own defaults apply where the file is silent, and --config takes an
OpenEvolve YAML file as well as TOML (folders written here, in OpenEvolve's format)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from engine.tasks.loader import load_any_task
from tests.e2e.conftest import FAST, ROOT, evotui, free_port, summary_of
from tests.programs.test_loaders import INITIAL, OE_EVALUATOR


def _folder(tmp_path: Path, config: str | None) -> Path:
    folder = tmp_path / "oe"
    folder.mkdir(parents=True)
    (folder / "initial_program.py").write_text(INITIAL)
    (folder / "evaluator.py").write_text(OE_EVALUATOR)
    if config is not None:
        (folder / "config.yaml").write_text(config)
    return folder


def test_openevolve_defaults_apply_where_the_config_is_silent(tmp_path: Path) -> None:
    task = load_any_task(str(_folder(tmp_path, None)))
    assert task.settings.eval_timeout_s == 300 and task.settings.cascade is True  # OpenEvolve's own
    set_here = load_any_task(str(_folder(tmp_path / "b", "evaluator:\n  timeout: 12\n  cascade_evaluation: false\n")))
    assert set_here.settings.eval_timeout_s == 12 and set_here.settings.cascade is False


def test_llm_api_base_in_config_yaml_is_the_endpoint_the_run_uses(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(port),
                               "--time-scale", "2000"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        config = (f"max_iterations: 3\nllm:\n  api_base: http://127.0.0.1:{port}/v1\n"
                  "  models:\n    - name: sim-qwen3-8b\n      weight: 1.0\n  temperature: 0.5\n")
        folder = _folder(tmp_path, config)
        deadline = time.monotonic() + 60
        while True:
            proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "r.db"), "--quiet")
            if proc.returncode != 3 or time.monotonic() > deadline:
                break  # 3 = endpoint unreachable: the server is still starting
            time.sleep(0.2)
        assert proc.returncode == 0, proc.stderr[-2000:]
        s = summary_of(proc)
        assert s["backend"] == f"http://127.0.0.1:{port}/v1" and s["simulated"] is False
        assert s["proposal_attempts"] == 3  # max_iterations
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_an_openevolve_yaml_is_accepted_by_config(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    phase = tmp_path / "config_phase_1.yaml"
    phase.write_text("max_iterations: 2\nrandom_seed: 5\nevaluator:\n  timeout: 40\n"
                     "database:\n  num_islands: 4\n")
    proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "y.db"), "--config", str(phase), *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert summary_of(proc)["proposal_attempts"] == 2
    assert "database.num_islands (islands arrive with the LoongFlow strategy)" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("evaluator:\n  timeout: -1\n")
    proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "z.db"), "--config", str(bad), *FAST)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "eval_timeout_s" in proc.stderr


def test_max_code_length_filters_long_candidates_before_evaluation(tmp_path: Path) -> None:
    from engine.code.filters import ProgramFilters

    task = load_any_task(str(_folder(tmp_path, "max_code_length: 200\n")))
    assert task.settings.max_code_length == 200
    filters = ProgramFilters(max_length=task.settings.max_code_length)
    longer = INITIAL.replace("return 0.5", "return 0.5" + " + 0.0" * 40)
    verdict = filters.check(INITIAL, longer)
    assert verdict.kind == "length" and "over the limit of 200" in verdict.reason
    assert filters.check(INITIAL, INITIAL.replace("0.5", "0.6")).passed
