"""The managed llama.cpp server and the hardened client against it (real HTTP, real model)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from engine.config import EndpointConfig
from engine.llm.client import LLMClient
from engine.llm.errors import LLMError
from engine.llm.local import LocalServer, LocalServerError, bundled_model, resolve_model
from engine.llm.shrink import middle_out
from tests.real.conftest import ROOT, launcher_pids, wait_gone

SAY = [{"role": "system", "content": "Answer in one short line."}, {"role": "user", "content": "Name a colour."}]


def client(info: dict, **cfg) -> LLMClient:
    settings = dict(url=info["url"], model=info["model"], max_tokens=8, temperature=0.0, max_retries=0) | cfg
    return LLMClient(EndpointConfig(**settings), name="task", on_call=lambda rec: None)


async def test_serve_answers_streams_usage_and_reports_slots(served):
    c = client(served, stream=True)
    await c.check()
    assert c.slots == served["slots"] == 2  # concurrency capped to the server's slots
    res = await c.chat(SAY, stage="rollout", seed=1)
    assert res.text and res.prompt_tokens > 0 and 0 < res.completion_tokens <= 8  # usage from the final chunk
    other = client(served, model="any-name-at-all")  # llama.cpp ignores `model`: accepted
    await other.check()
    assert (await other.chat(SAY, stage="rollout")).completion_tokens > 0
    await c.aclose()
    await other.aclose()


async def test_context_overflow_is_shrunk_and_retried_once(served):
    c = client(served)
    long = [{"role": "system", "content": "Summarise."},
            {"role": "user", "content": "Intro.\n" + "alpha beta gamma delta " * 400 + "\nAnswer in one word."}]
    with pytest.raises(LLMError) as info:
        await c.chat(long, stage="propose")  # no truncation rule: a failed call with the reason
    err = info.value
    assert err.kind == "context_overflow" and not err.fatal and err.context_tokens == 512
    res = await c.chat(long, stage="propose", shrink=middle_out)
    assert res.shrunk and res.completion_tokens > 0 and c.shrunk == 1
    await c.aclose()


async def test_first_token_and_total_timeouts_are_separate(served):
    slow = client(served, stream=True, first_token_timeout_s=0.001)
    with pytest.raises(LLMError) as info:
        await slow.chat(SAY, stage="rollout")
    assert info.value.kind == "timeout" and "first_token_timeout_s" in str(info.value)
    total = client(served, total_timeout_s=0.001)
    with pytest.raises(LLMError) as info:
        await total.chat(SAY, stage="rollout")
    assert "total_timeout_s" in str(info.value)
    await slow.aclose()
    await total.aclose()


async def test_repeated_prefix_hits_the_cache(served):
    c = client(served, max_tokens=1)
    prefix = "You follow these house rules. " + " ".join(f"Rule {i}: items are sorted." for i in range(40))
    await c.chat([{"role": "system", "content": prefix}, {"role": "user", "content": "a"}], stage="x")
    t0 = time.perf_counter()
    await c.chat([{"role": "system", "content": prefix}, {"role": "user", "content": "b"}], stage="x")
    cached = time.perf_counter() - t0
    t0 = time.perf_counter()
    await c.chat([{"role": "system", "content": "Different. " + prefix}, {"role": "user", "content": "b"}], stage="x")
    cold = time.perf_counter() - t0
    assert cached < cold  # the stable prefix is not processed again
    await c.aclose()


def test_no_orphan_after_sigterm_or_sigkill_of_serve():
    before = launcher_pids()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-m", "evotui.cli", "local", "serve", "--port", "0", "--parallel", "1",
                                 "--ctx", "256"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout.readline(), proc.stderr.read()
        ours = launcher_pids() - before
        assert len(ours) == 1
        proc.send_signal(sig)
        proc.wait(timeout=20)
        assert wait_gone(ours) == set(), f"server outlived evotui after {sig.name}"
        if sig == signal.SIGTERM:
            assert proc.returncode == 0


async def test_bad_inputs_give_one_line_errors(tmp_path, served):
    port = int(served["url"].rsplit(":", 1)[1].split("/")[0])
    taken = LocalServer(resolve_model(None), port=port, parallel=1, ctx=256)
    with pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is already in use") as info:
        await taken.start()
    assert info.value.exit_code == 2
    corrupt = tmp_path / "broken.gguf"
    corrupt.write_bytes(bundled_model().read_bytes()[:2_000_000])
    with pytest.raises(LocalServerError, match="could not be loaded: .*corrupt") as info:
        await LocalServer(resolve_model(str(corrupt)), parallel=1, ctx=256).start()
    assert "\n" not in str(info.value)
    never = LocalServer(resolve_model(None), parallel=1, ctx=256, startup_timeout_s=0.05)
    with pytest.raises(LocalServerError, match="did not become healthy within 0.05s"):
        await never.start()
    assert never.pid is None  # stopped by its PID, not left loading
    # The error names the server's log; the caller's cleanup (`evotui local serve` stops the server
    # in a finally) must not delete what the user was just told to read.
    never.stop()
    assert never.log_path is not None and never.log_path.exists()
    never.log_path.unlink()
