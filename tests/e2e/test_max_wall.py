"""`--max-wall W` is a deadline against a server that answers slowly: `evotui run` ends within
W + its grace instead of waiting for the server, and `evotui resume` with a larger limit redoes
the cancelled items exactly once.

The server: `evotui sim-server` behind a proxy on 127.0.0.1 that, while slow, holds every
rollout request (the first stage of an item; the seed's evaluation passes) for HOLD_S before
answering. A run that waited for its in-flight work would get those answers; this one must not.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections import Counter

import httpx
import pytest

from tests.e2e.conftest import evotui, read_rows, serve_sim, summary_of

HOLD_S = 60.0
"""How long the slow server holds a rollout: the run must end long before."""
WALL_S = 8.0
"""Long enough for the seed's evaluation (fast) on a loaded machine, short against HOLD_S."""
PROPOSALS = 4


class SlowProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.slow = True
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.held = 0
        self.answered_held = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: the test reports what matters
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None) -> None:
                stage = self.headers.get("X-Evotui-Stage", "")
                held = proxy.slow and body is not None and stage == "rollout"
                if held:
                    with proxy.lock:
                        proxy.held += 1
                    proxy.release.wait(HOLD_S)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "x-evotui-stage")}
                resp = httpx.request(self.command, proxy.upstream + self.path, content=body, headers=headers,
                                     timeout=30)
                try:
                    self.send_response(resp.status_code)
                    self.send_header("Content-Type", resp.headers.get("content-type", "application/json"))
                    self.send_header("Content-Length", str(len(resp.content)))
                    self.end_headers()
                    self.wfile.write(resp.content)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up on this request (the deadline cancelled it)
                if held:
                    with proxy.lock:
                        proxy.answered_held += 1

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "SlowProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sim_upstream():
    proc, url = serve_sim("--time-scale", "2000")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()


def test_max_wall_ends_at_the_deadline_against_a_slow_server_and_resume_redoes_the_cut_work(db, sim_upstream):
    with SlowProxy(sim_upstream) as proxy:
        started = time.monotonic()
        first = evotui("run", "rules", "--no-ui", "--quiet", "--db", str(db), "--llm-url", proxy.url,
                       "--model", "sim-qwen3-8b", "--mode", "async", "--max-wall", str(WALL_S),
                       "--max-proposals", str(PROPOSALS), timeout=HOLD_S - 5)
        took = time.monotonic() - started
        answered_held = proxy.answered_held  # before anything is let through
        assert first.returncode == 0, first.stderr
        assert "Traceback" not in first.stderr
        s = summary_of(first)
        assert (s["status"], s["stop_reason"]) == ("completed", "budget exhausted: wall_s")
        deadline = s["deadline"]
        assert (deadline["limit_s"], deadline["grace_s"], deadline["hit"]) == (WALL_S, WALL_S / 10, True)
        assert proxy.held >= 1 and answered_held == 0, "the run ended without waiting for the slow server"
        assert took < HOLD_S and s["wall_s"] < HOLD_S
        cancelled = [c["item_id"] for c in deadline["cancelled"]]
        assert cancelled and {c["stage"] for c in deadline["cancelled"]} == {"rollout"}
        assert f"cancelled {len(cancelled)} unfinished work item(s)" in first.stderr
        open_items = [i for (i,) in read_rows(db, "SELECT item_id FROM items WHERE outcome IS NULL ORDER BY item_id")]
        assert open_items == sorted(cancelled)
        assert read_rows(db, "SELECT count(*) FROM llm_calls WHERE stage = 'rollout' AND status = 'ok'") == [(0,)]

        # The server is fast again; a larger limit lets the resume redo the cancelled items.
        proxy.slow = False
        proxy.release.set()
        second = evotui("resume", s["run_id"], "--db", str(db), "--no-ui", "--quiet", "--max-wall", "600")
    assert second.returncode == 0, second.stderr
    s2 = summary_of(second)
    assert (s2["status"], s2["stop_reason"]) == ("completed", "budget exhausted: proposals")
    assert s2["proposal_attempts"] == PROPOSALS and s2["deadline"]["hit"] is False
    assert read_rows(db, "SELECT count(*) FROM items WHERE outcome IS NULL") == [(0,)]
    finished = Counter(read_rows(db, "SELECT item_id, stage FROM item_stages WHERE outcome IS NOT NULL"))
    for item_id in cancelled:
        assert finished[(item_id, "rollout")] == 1, (item_id, finished)
        assert all(n == 1 for (i, _), n in finished.items() if i == item_id), finished
        # Every rollout answer of a cancelled item came from the resume, one minibatch's worth.
        assert read_rows(db, "SELECT count(*) FROM llm_calls WHERE item_id = ? AND stage = 'rollout' AND "
                             "status = 'ok'", item_id) == [(3,)]
    charged = read_rows(db, "SELECT count(*) FROM items WHERE json_extract(payload_json, '$.proposal') IS NOT NULL")
    assert charged == [(PROPOSALS,)], "each proposal charged once"
