"""`evotui bench --peers gepa,gepa-pxn,openevolve,shinka`: the real libraries as rows beside evotui's.

Each peer run gets a fresh simulated backend on loopback with the bench's profile, seed and
time scale (evotui's rows use the same simulator in process) and runs in a child process
(evotui/peers/child.py). The row has the keys of an evotui row; what only one side measures is
None. Throughput is proposals per simulated minute from the end of the seed's evaluation, as
for evotui; utilization, tokens and KV figures come from the backend's own counters.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from engine.tasks.loader import load_any_task
from evotui import peers as peers_mod
from evotui.bench import quality as bench_quality
from evotui.peers import Peer, lifeline
from evotui.peers.sim_endpoint import SimEndpoint

_RUN_TIMEOUT_S = 3600


class PeerFailed(RuntimeError):
    pass


def _child(peer: Peer, task: str, url: str, seed: int, proposals: int, time_scale: float) -> dict:
    cmd = [sys.executable, "-m", "evotui.peers.child", peer.name, task, "--url", url, "--seed", str(seed),
           "--proposals", str(proposals), "--time-scale", str(time_scale), *lifeline.child_args()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise PeerFailed(f"{peer.name} seed {seed}: no result after {_RUN_TIMEOUT_S} s") from None
    rows = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PeerFailed(f"{peer.name} seed {seed}: {tail}")
    return json.loads(rows[-1])


def run_peer(peer: Peer, task: str, seed: int, profile: str, proposals: int, time_scale: float,
             program_heldout: bool = False) -> dict:
    """One run of a real peer; a row in the layout of bench.run_one's (program_heldout: as there)."""
    if not peers_mod.installed(peer):  # one line, before a backend is started for nothing
        raise PeerFailed(f"{peer.name}: the {peer.package} package is not installed ({peer.install})")
    with SimEndpoint(profile, seed, time_scale) as sim:
        got = _child(peer, task, sim.url, seed, proposals, time_scale)
        backend = sim.metrics()
    minutes = got["pipeline_minutes"]
    best_text = got.get("best_text")  # the peer's own choice of best (GEPA: best_candidate)
    loaded = load_any_task(task)
    held = asyncio.run(bench_quality.heldout_score(loaded, best_text, seed)) if best_text else None
    if program_heldout and best_text and loaded.kind == "program":
        held = asyncio.run(bench_quality.program_heldout_score(loaded, best_text))
    return {
        "mode": peer.name,
        "peer": True,
        "settings": peer.settings,
        "seed": seed,
        "status": "completed",
        "proposals": got["proposals"],
        "proposal_attempts": got["proposals"],
        "evaluated": got.get("evaluated", got["proposals"]),
        "proposals_per_min": got["proposals"] / minutes if minutes > 0 else 0.0,
        "pipeline_minutes": minutes,
        "best_score": got["best_score"],
        "heldout_score": held,
        "seed_score": got["seed_score"],
        "accepted": got["accepted"],
        "merges": 0,
        "llm_calls": backend["requests_served"],
        "tokens_generated": backend["tokens_generated"],
        "tokens_wasted": None,
        "discarded_pct": None,
        "patched_pct": None,
        "gap_p50": None,
        "gap_p95": None,
        "utilization": backend["utilization"],
        "throughput_utilization": backend["throughput_utilization"],
        "preemptions": backend.get("preemptions"),
        "clock": backend.get("clock", "wall"),  # the server's clock, which timed the row (sim-server --clock)
        "wall_s": got["wall_s"],
        "pipeline_wall_s": got["wall_s"],
        "best_history": got["best_history"],
    }
