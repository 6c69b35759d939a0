"""Several endpoints per stage (issue 20, item 3) against two `evotui sim-server`s on loopback:
traffic goes to both, least loaded first; one killed mid-run, its requests move to the other,
it rests (health-checked), and the run finishes its budget; per-endpoint figures reach the
summary and every call's row names the endpoint that served or failed it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.config import EndpointConfig
from engine.llm.routing import RoutedClient
from tests.e2e.conftest import ROOT, evotui, free_port, summary_of, wait_healthy


class SimServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evotui.cli", "sim-server", "--port", str(self.port), "--time-scale", "2000"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        wait_healthy(f"http://127.0.0.1:{self.port}", self.proc, limit_s=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def two_servers():
    servers = [SimServer(), SimServer()]
    yield servers
    for s in servers:
        s.kill()


def routes_config(tmp_path: Path, servers: list[SimServer], weights=(1, 1), interval: float = 0.5) -> Path:
    cfg = tmp_path / "routes.toml"
    entries = ", ".join(f'{{ url = "{s.url}", weight = {w} }}' for s, w in zip(servers, weights))
    cfg.write_text(f'[task_llm]\nmodel = "sim-qwen3-8b"\nhealth_interval_s = {interval}\nendpoints = [{entries}]\n')
    return cfg


def calls_by_url(db: Path) -> dict[str, dict[str, int]]:
    con = sqlite3.connect(db)
    try:
        out: dict[str, dict[str, int]] = {}
        for url, status, n in con.execute("SELECT url, status, count(*) FROM llm_calls GROUP BY url, status"):
            out.setdefault(url, {})[status] = n
        return out
    finally:
        con.close()


def _served(db: Path, url: str) -> int:
    """Calls url answered so far (0 while the run is still creating its database)."""
    if not db.exists():
        return 0
    try:
        return calls_by_url(db).get(url, {}).get("ok", 0)
    except sqlite3.OperationalError:  # no schema yet, or the writer holds a lock this instant
        return 0


def test_requests_spread_over_both_endpoints(two_servers, tmp_path):
    db = tmp_path / "r.db"
    a, b = two_servers
    proc = evotui("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--config",
                  str(routes_config(tmp_path, two_servers)), "--max-proposals", "12")
    assert proc.returncode == 0, proc.stderr[-2000:]
    s = summary_of(proc)
    assert s["status"] == "completed" and s["simulated"] is False and s["proposal_attempts"] == 12
    figures = {f["url"]: f for f in s["llm_endpoints"]}
    assert set(figures) == {a.url, b.url}
    assert all(f["calls"] > 0 and f["healthy"] and f["errors"] == 0 for f in figures.values())
    assert sum(f["calls"] for f in figures.values()) == s["llm_calls"]
    rows = calls_by_url(db)
    assert {url: sum(c.values()) for url, c in rows.items()} == {u: f["calls"] for u, f in figures.items()}


def test_a_server_killed_mid_run_fails_over_and_rests(two_servers, tmp_path):
    db = tmp_path / "r.db"
    a, b = two_servers
    args = [sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--quiet", "--db", str(db), "--config",
            str(routes_config(tmp_path, two_servers)), "--max-proposals", "30"]
    run = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:  # until server a has answered some calls of this run
        served = _served(db, a.url)
        if served >= 5:
            break
        assert run.poll() is None and time.monotonic() < deadline, "the run ended before a served 5 calls"
        time.sleep(0.05)
    a.kill()
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err[-2000:]
    s = summary_of(subprocess.CompletedProcess(args, 0, out, err))
    assert s["status"] == "completed" and s["proposal_attempts"] == 30
    figures = {f["url"]: f for f in s["llm_endpoints"]}
    assert figures[a.url]["healthy"] is False and figures[a.url]["failures"] >= 1
    assert figures[b.url]["healthy"] is True and figures[b.url]["failures"] == 0
    rows = calls_by_url(db)
    assert rows[a.url].get("error", 0) >= 1 and "error" not in rows[b.url]
    # Every request a refused moved to b: no item failed for want of an answer.
    con = sqlite3.connect(db)
    try:
        failed = con.execute("SELECT count(*) FROM items WHERE error LIKE '%LLM error%'").fetchone()[0]
    finally:
        con.close()
    assert failed == 0


class _Fake:
    """An endpoint for the routing rule alone: a load and a limit."""

    def __init__(self, cfg: EndpointConfig, *, name: str, on_call=None) -> None:
        self.base_url, self.model, self.in_flight, self.calls, self.errors, self.retries = cfg.url, cfg.model, 0, 0, 0, 0


def test_the_least_loaded_healthy_endpoint_by_weight_takes_the_next_request():
    cfg = EndpointConfig.model_validate({"endpoints": [{"url": "http://127.0.0.1:1/v1", "weight": 1},
                                                       {"url": "http://127.0.0.1:2/v1", "weight": 3,
                                                        "max_concurrency": 4}]})
    r = RoutedClient(cfg, name="task", make=_Fake)
    one, two = r.routes
    assert r.pick(set()) == 1  # idle: the heavier weight wins
    two.client.in_flight = 3  # (3 + 1) / 3 > (0 + 1) / 1
    assert r.pick(set()) == 0
    one.client.in_flight, two.client.in_flight = 2, 4  # two is at its limit: one, though busier by weight
    assert r.pick(set()) == 0
    assert r.pick({0}) == 1  # a request that failed on one goes to two, full or not
    one.healthy = False
    assert r.pick(set()) == 1 and r.pick({1}) is None
    assert cfg.url == "http://127.0.0.1:1/v1"  # a list's stage is not taken for the simulator
