"""The same run over real HTTP: `evotui sim-server` on loopback, reached with --llm-url."""

import subprocess
import sys

import httpx
import pytest

from tests.e2e.conftest import ROOT, evotui, free_port, serve_sim, summary_of


@pytest.fixture
def sim_server():
    proc, url = serve_sim("--time-scale", "2000")
    yield f"{url}/v1"
    proc.terminate()
    proc.wait(timeout=10)
    proc.stderr.close()


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


def test_a_calibrated_profile_is_served_and_flags_override_it(tmp_path):
    profile = tmp_path / "profile.toml"
    profile.write_text('[sim]\nprofile = "vllm"\nvllm_max_num_seqs = 3\nseed = 5\n\n'
                       '[sim.lengths.default]\nmedian = 27.0\nsigma = 0.8\nmax = 64\n')
    for extra, expect in (([], ("vllm", 3)), (["--profile", "api"], ("api", None))):
        proc, url = serve_sim("--config", str(profile), *extra)
        try:
            m = httpx.get(f"{url}/v1/sim/metrics", timeout=5).json()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            banner = proc.stderr.read()
            proc.stderr.close()
        assert m["profile"] == expect[0] and "seed 5" in banner, banner
        if expect[1] is not None:
            assert m["capacity"] == 3


@pytest.mark.parametrize("body,says", [("[sim]\nvllm_max_num_sqs = 3\n", "unknown key 'vllm_max_num_sqs'"),
                                       ("[task_llm]\nmodel = 'x'\n", "no [sim] table"),
                                       ("[sim\n", "not valid TOML")])
def test_a_bad_profile_is_one_line_and_exit_2(tmp_path, body, says):
    profile = tmp_path / "bad.toml"
    profile.write_text(body)
    out = subprocess.run([sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(free_port()),
                          "--config", str(profile)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
