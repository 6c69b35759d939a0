"""The real peers as bench rows: GEPA, OpenEvolve and ShinkaEvolve, unchanged, against the simulated backend.

Every GEPA row runs at stock GEPA's parallelism (10 requests at a time, proposals of an
iteration evaluated one after another; evotui/peers/gepa_peer.py).

Each peer run gets a fresh `evotui sim-server` on loopback (same profile, seed and time scale
as evotui's rows) and runs in a child process of its own (`python -m evotui.peers.child`), so a
peer's state, threads and process pools never touch the bench process. What is ours is only
the glue a user of the library writes too: a GEPA adapter that runs the task's prompt on
examples and scores them with the task's metric, and an OpenEvolve evaluation file that
hands each program to evotui's sandbox.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class Peer:
    name: str
    kind: str
    """The task kind the peer runs: prompt (GEPA) or program (OpenEvolve, ShinkaEvolve)."""
    package: str
    settings: str
    """The peer's settings, as the bench states them."""
    install: str = "pip install -e '.[peers]'"
    """How to install the peer's package."""


PEERS: dict[str, Peer] = {
    p.name: p for p in (
        Peer("gepa", "prompt", "gepa",
             "gepa.optimize defaults: SingleMutationSampling, pareto selection, minibatch 3, no merge"),
        Peer("gepa-pxn", "prompt", "gepa",
             "gepa.optimize with sampling_strategy=PxNSampling(2, 4): 8 proposals per iteration, "
             "selection_strategy=AllImprovements (every improving proposal enters)"),
        Peer("gepa-pxn-best", "prompt", "gepa",
             "gepa.optimize with sampling_strategy=PxNSampling(2, 4), selection_strategy=BestImprovement "
             "(only an iteration's best improving proposal enters)"),
        Peer("openevolve", "program", "openevolve",
             "openevolve Config() defaults (islands, diff-based evolution, max_tokens 4096) with the "
             "repository's parallel_evaluations = 4"),
        Peer("shinka", "program", "shinka",
             "shinka ShinkaEvolveRunner (async) defaults (4 evaluation and 6 proposal jobs, diff/full/cross "
             "0.6/0.3/0.1, max_tokens 16384, islands) with the simulated endpoint as its one model and no "
             "embedding model",
             install="pip install -e '.[shinka]' && pip install --no-deps shinka-evolve==0.0.7"),
    )
}


def parse(spec: str, task_kind: str) -> list[Peer]:
    """Peers named in `--peers a,b`; ValueError naming what is wrong and what to choose."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(PEERS)}")
    wrong = [n for n in names if PEERS[n].kind != task_kind]
    if wrong:
        raise ValueError(f"peer(s) {', '.join(wrong)} run {PEERS[wrong[0]].kind} tasks, and this task is a "
                         f"{task_kind} task; use gepa/gepa-pxn with a prompt task (rules), openevolve or shinka with a "
                         "program task (circle_packing)")
    return [PEERS[n] for n in names]


def installed(peer: Peer) -> bool:
    return importlib.util.find_spec(peer.package) is not None
