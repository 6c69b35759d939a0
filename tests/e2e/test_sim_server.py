"""The same run over real HTTP: `evotui sim-server` on loopback, reached with --llm-url."""

import subprocess
import sys
import time

import httpx
import pytest

from tests.e2e.conftest import ROOT, evotui, free_port, summary_of


@pytest.fixture
def sim_server():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(port), "--time-scale", "2000"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise AssertionError(proc.communicate()[1])
    yield f"{url}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def test_run_over_loopback_behaves_like_in_process(db, sim_server):
    proc = evotui("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--llm-url", sim_server,
                  "--model", "sim-qwen3-8b", "--max-proposals", "12")
    assert proc.returncode == 0, proc.stderr
    s = summary_of(proc)
    assert s["status"] == "completed" and s["backend"] == sim_server and s["simulated"] is False
    assert s["proposal_attempts"] == 12 and s["llm_calls"] > 12
    assert s["best_score"] > s["seed_score"]


def test_streaming_over_loopback(db, sim_server, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[task_llm]\nurl = "{sim_server}"\nmodel = "sim-qwen3-8b"\nstream = true\n')
    proc = evotui("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--config", str(cfg), "--max-proposals", "4")
    assert proc.returncode == 0, proc.stderr
    s = summary_of(proc)
    assert s["completion_tokens"] > 0 and s["prompt_tokens"] > 0


def test_a_model_the_server_does_not_list_is_a_clear_warning(db, sim_server):
    """The server decides (a proxy routes names it does not list; a real refusal is a 404 at the
    first request, exit 3): the preflight warns with the names it lists."""
    proc = evotui("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--llm-url", sim_server, "--model", "gpt-nope",
                  "--max-proposals", "1")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert any("model 'gpt-nope' is not listed" in line and "available: " in line for line in proc.stderr.splitlines())
