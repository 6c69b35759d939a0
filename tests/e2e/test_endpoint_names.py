"""Endpoints a folder names (issue 35, item 4): an unreachable endpoint from an OpenEvolve
config.yaml is named with its file and key and the ways out; a model the server does not list is
a warning, and the requests decide."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.conftest import ROOT, evotui, free_port, summary_of, wait_healthy
from tests.e2e.test_faults import _popen


def _openevolve_folder(tmp_path: Path, api_base: str, model: str) -> Path:
    folder = tmp_path / "oe_task"
    folder.mkdir()
    for name in ("initial_program.py", "evaluator.py"):
        shutil.copy(ROOT / "tasks" / "circle_packing" / name, folder / name)
    (folder / "config.yaml").write_text(f"llm:\n  api_base: {api_base}\n  models:\n    - name: {model}\n"
                                        "      weight: 1.0\nmax_iterations: 2\n")
    return folder


def test_an_unreachable_endpoint_from_config_yaml_names_its_file_and_the_ways_out(tmp_path: Path) -> None:
    folder = _openevolve_folder(tmp_path, f"http://127.0.0.1:{free_port()}/v1", "google/gemini-2.0-flash-001")
    proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "r.db"), "--quiet")
    assert proc.returncode == 3, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "Traceback" not in proc.stderr
    assert f"{folder / 'config.yaml'} (llm.api_base)" in last and "--llm sim" in last and "--llm-url" in last, last
    # The way out works: the same folder on the simulated backend.
    ok = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "s.db"), "--llm", "sim", "--time-scale", "2000",
                "--quiet")
    assert ok.returncode == 0, ok.stderr


def test_a_model_the_server_does_not_list_is_a_warning(tmp_path: Path) -> None:
    port = free_port()
    server = _popen("sim-server", "--port", str(port), "--time-scale", "2000")
    try:
        folder = _openevolve_folder(tmp_path, f"http://127.0.0.1:{port}/v1", "google/gemini-2.0-flash-001")
        wait_healthy(f"http://127.0.0.1:{port}", server)
        proc = evotui("run", str(folder), "--no-ui", "--db", str(tmp_path / "r.db"))
        assert proc.returncode == 0, proc.stderr
        assert "model 'google/gemini-2.0-flash-001' is not listed" in proc.stderr
        assert summary_of(proc)["proposals"] == 2
    finally:
        server.terminate()
        server.communicate(timeout=30)
