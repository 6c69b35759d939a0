"""`evotui sim-server --clock virtual` against a real client process over loopback: simulated
time is the replies' latencies plus the client's CPU time, whatever the wall clock does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.llm.sim import client_watch

pytestmark = pytest.mark.skipif(not client_watch.available(), reason="the virtual clock reads Linux's /proc")

# The client starts the server itself (so the server watches it) and makes sequential requests
# with 0.2 s of CPU work between them; it prints what it measured.
CLIENT = r'''
import json, os, socket, subprocess, sys, time
import httpx
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
srv = subprocess.Popen([sys.executable, "-c", "from evotui.cli import main; raise SystemExit(main())", "sim-server",
                        "--port", str(port), "--clock", "virtual", "--time-scale", "100",
                        "--parent-pid", str(os.getpid())], stderr=subprocess.DEVNULL)
try:
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(url + "/health", timeout=5.0); break
        except httpx.TransportError:
            time.sleep(0.1)
    t0 = httpx.get(url + "/v1/sim/metrics", timeout=30.0).json()["sim_now"]
    c0, latency, work = time.process_time(), 0.0, 0.0
    for i in range(5):
        r = httpx.post(url + "/v1/chat/completions", timeout=600.0,
                       json={"messages": [{"role": "user", "content": f"question {i} " * 40}]})
        latency += float(r.headers["x-evotui-sim-seconds"])
        c = time.process_time()
        while time.process_time() - c < 0.2:
            pass
        work += time.process_time() - c
    m = httpx.get(url + "/v1/sim/metrics", timeout=30.0).json()
    print(json.dumps({"elapsed": m["sim_now"] - t0, "latency": latency, "work": work,
                      "cpu": time.process_time() - c0, "clock": m["clock"], "jumps": m["jumps"]}))
finally:
    srv.terminate(); srv.wait()
'''


def test_simulated_time_is_latency_plus_client_cpu(tmp_path: Path):
    out = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["clock"] == "virtual" and got["jumps"] >= 5  # it waited on every reply by jumping
    # Each reply's latency is its own stretch of simulated time (sequential requests), and the
    # client's work between them is counted at its CPU time: at x100 the wall clock would count
    # every wall second of that work (and of any load on the machine) as 100 s.
    assert got["elapsed"] >= got["latency"] + got["work"] - 0.02
    assert got["elapsed"] <= got["latency"] + got["cpu"] + 0.05


def test_virtual_clock_needs_a_process_to_watch():
    out = subprocess.run([sys.executable, "-c", "from evotui.cli import main; raise SystemExit(main())",
                          "sim-server", "--clock", "virtual", "--port", "1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == "evotui: error: --clock virtual needs the client's process: give --watch-pid PID"
