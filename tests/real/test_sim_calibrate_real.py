"""`evotui sim-calibrate` against the managed llama.cpp server (SmolLM2-135M): the profile it
writes loads as a run config and holds what was measured. Skipped, with the reason, when the
local backend or its model package is missing (conftest.py)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from engine.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


def test_calibrate_writes_a_profile_the_simulator_loads(tmp_path: Path):
    out = tmp_path / "profile.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "evotui.cli", "sim-calibrate", "--llm", "local", "--parallel", "2", "--ctx", "1024",
         "--threads", "1", "--levels", "1,2", "--requests", "1", "--decode-tokens", "24", "--prefill-repeats", "1",
         "--llm-max-tokens", "24", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "concurrency 2:" in proc.stderr and "profile written to" in proc.stderr
    sim = RunConfig.model_validate(tomllib.loads(out.read_text())).sim
    assert sim.profile == "vllm" and sim.vllm_max_num_seqs == 2  # the server's slots, from /props
    assert sim.vllm_kv_cache_tokens == 2 * 1024
    # Both positive; peak may fall below the lone-sequence speed: a 1-thread server on a loaded
    # machine decodes two sequences slower in aggregate than one (measured: 67.7 and 34.3 tok/s).
    assert sim.vllm_single_seq_tok_s > 0 and sim.vllm_peak_tok_s > 0
    assert sim.vllm_prefill_tok_s > 0
    # llama.cpp's cache_prompt (on by default): a prompt sent again gets its first token at once
    # (measured: 0.913 s the first time, 0.040 s again, for a 103-token prompt)
    assert "prefix cache:" in proc.stderr and sim.vllm_prefix_caching is True
    assert sim.lengths["default"].max == 24  # natural lengths of the probe prompt, capped at max_tokens
    assert "#     2 |" in out.read_text()  # the measurements stay in the file, as comments


def test_a_server_that_is_not_there_is_one_line_and_exit_3(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "evotui.cli", "sim-calibrate", "--url", "http://127.0.0.1:9/v1", "--out",
         str(tmp_path / "p.toml")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith("evotui: error:") and "Traceback" not in proc.stderr
