"""A fresh simulated backend on loopback for one peer run: `evotui sim-server` in a child
process, its address, and its figures (`/sim/metrics`: simulated clock, utilization, KV)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from evotui.peers import lifeline

_START_TIMEOUT_S = 60.0
DEFAULT_CLOCK = "virtual"
"""The clock of endpoints made without one: the bench sets it from --sim-clock for every row."""


class SimEndpointError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SimEndpoint:
    """`with SimEndpoint(profile, seed, time_scale) as sim:` sim.url is http://127.0.0.1:PORT/v1.
    clock "virtual" (the default): the server's simulated time counts this process tree's CPU
    time while it works and jumps while it waits on the backend (engine/llm/sim/virtual_clock.py),
    so a loaded machine does not change the figures; "wall": wall time x time scale. config: a
    TOML file whose [sim] table the server serves (a calibrated profile), under profile and seed.
    answers_from: run databases whose recorded replies it serves (engine/llm/sim/replay.py)."""

    def __init__(self, profile: str, seed: int, time_scale: float | None, clock: str | None = None,
                 config: Path | None = None, answers_from: list[Path] | None = None) -> None:
        self.profile, self.seed, self.time_scale = profile, seed, time_scale
        self.clock = clock or DEFAULT_CLOCK
        self.config, self.answers_from = config, list(answers_from or [])
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "SimEndpoint":
        for _ in range(3):  # a port taken between the probe and the bind: try another
            self.port = _free_port()
            cmd = [sys.executable, "-c", "from evotui.cli import main; raise SystemExit(main())", "sim-server",
                   "--host", "127.0.0.1", "--port", str(self.port), "--profile", self.profile, "--seed", str(self.seed),
                   "--clock", self.clock, *lifeline.child_args()]
            if self.time_scale is not None:
                cmd += ["--time-scale", str(self.time_scale)]
            if self.config is not None:
                cmd += ["--config", str(self.config)]
            for db in self.answers_from:
                cmd += ["--answers-from", str(db)]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if self._wait_ready():
                return self
            self._stop()
        raise SimEndpointError("the simulated backend (evotui sim-server) did not start on loopback")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2.0).status_code == 200:
                    return True
            except httpx.TransportError:
                time.sleep(0.1)
        return False

    def metrics(self) -> dict:
        return httpx.get(f"{self.url}/sim/metrics", timeout=10.0).json()

    def sim_now(self) -> float:
        """The server's simulated clock, in seconds."""
        return float(self.metrics()["sim_now"])

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def __exit__(self, *exc) -> None:
        self._stop()
