"""Real ShinkaEvolve (shinka-evolve's asynchronous `ShinkaEvolveRunner`, unchanged) on an evotui
program task, against a simulated backend.

Ours is only what a Shinka user writes: the configuration and an `evaluate.py`. The runner and
its `EvolutionConfig`, `LocalJobConfig` and `DatabaseConfig` are at their defaults (4 evaluation
jobs, 6 proposal jobs, diff/full/cross patches 0.6/0.3/0.1, temperatures 0/0.5/1, max_tokens
16384, UCB model selection, islands) except:

- llm_models: the one simulated endpoint, as Shinka's `local/MODEL@URL` (the default is four
  hosted models);
- embedding_model None: the simulator serves no embeddings (the default text-embedding-3-small
  is OpenAI's), so Shinka skips embedding similarity, as it does for any run without one;
- num_generations = the row's proposals + 1: Shinka's generation 0 is the initial program;
- results_dir: a scratch folder; verbose False: its per-job log lines are not the bench's.

The evaluate.py hands each program to evotui's sandbox with the task's evaluator and limits
(LLM-written code never runs unconfined), writes Shinka's metrics.json / correct.json, and
appends one line per evaluation to a log with the simulator's clock at its end, from which the
evaluated proposals, the best program (the suite re-scores it held out) and the pipeline time
(simulated: from the end of the initial program's evaluation, as evotui's, to the end of the last
one) are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy

from engine.tasks.program_task import ProgramTask
from evotui.peers.chat import MODEL

_EVALUATE_FILE = '''"""ShinkaEvolve evaluate.py written by evotui's bench: each program runs in evotui's sandbox."""
import argparse, asyncio, json, os, pathlib, time

import httpx

from engine.sandbox.core import Sandbox, SandboxLimits

EVALUATOR = {evaluator!r}
INITIAL = pathlib.Path({initial!r}).read_text()
LOG = {log!r}
METRICS_URL = {metrics_url!r}
LIMITS = SandboxLimits(**{limits!r})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--program_path", required=True)
    p.add_argument("--results_dir", required=True)
    args = p.parse_args()
    text = pathlib.Path(args.program_path).read_text()
    res = asyncio.run(Sandbox(LIMITS, concurrency=1).evaluate(EVALUATOR, text, mode={mode!r}))
    ok = res.ok and res.score is not None
    score = res.score if ok else 0.0
    out = pathlib.Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    public = {{k: v for k, v in (res.metrics or {{}}).items() if isinstance(v, (int, float))}}
    (out / "metrics.json").write_text(json.dumps({{"combined_score": score, "public": public, "private": {{}}}}))
    (out / "correct.json").write_text(json.dumps({{"correct": ok, "error": None if ok else res.reason}}))
    sim_t = float(httpx.get(METRICS_URL, timeout=10.0).json()["sim_now"])
    line = json.dumps({{"t": time.time(), "sim_t": sim_t, "score": score, "ok": ok,
                        "initial": text == INITIAL, "text": text}}) + "\\n"
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
'''


def _limits(task: ProgramTask) -> dict:
    lim = task.settings.limits()
    return {"wall_s": lim.wall_s, "memory_mb": lim.memory_mb, "nproc": lim.nproc, "threads": lim.threads}


def settings_changed(url: str, proposals: int, workdir: Path) -> dict:
    """The EvolutionConfig fields set away from their defaults (the module docstring says why)."""
    return {"llm_models": [f"local/{MODEL}@{url}"], "embedding_model": None, "num_generations": proposals + 1,
            "results_dir": str(workdir / "results")}


def run(task: ProgramTask, url: str, seed: int, proposals: int, sim_clock: Callable[[], float],
        workdir: Path) -> dict:
    """One ShinkaEvolveRunner run of `proposals` generations; figures in the bench's row layout.
    Shinka takes no seed: the bench's seed seeds the global generators it draws from (and the
    simulator, SimEndpoint)."""
    from shinka.core import EvolutionConfig, ShinkaEvolveRunner
    from shinka.database import DatabaseConfig
    from shinka.launch import LocalJobConfig

    # Shinka draws parents, islands and patch types from the global generators and takes no seed.
    random.seed(seed)
    numpy.random.seed(seed)

    workdir.mkdir(parents=True, exist_ok=True)
    initial = workdir / "initial.py"
    initial.write_text(task.initial_program)
    log = workdir / "evaluations.jsonl"
    evaluate = workdir / "evaluate.py"
    evaluate.write_text(_EVALUATE_FILE.format(evaluator=str(task.evaluator), mode=task.sandbox_mode,
                                              initial=str(initial), log=str(log), limits=_limits(task),
                                              metrics_url=f"{url}/sim/metrics"))
    evo = EvolutionConfig(init_program_path=str(initial), **settings_changed(url, proposals, workdir))
    # Shinka prints its banner and tables on stdout; stdout carries only the row (evotui/peers/child.py).
    with contextlib.redirect_stdout(sys.stderr):
        runner = ShinkaEvolveRunner(evo, LocalJobConfig(eval_program_path=str(evaluate)), DatabaseConfig(),
                                    verbose=False)
        asyncio.run(runner.run_async())
    sim_end = sim_clock()
    rows = sorted((json.loads(line) for line in _read(log).splitlines() if line.strip()), key=lambda r: r["t"])
    seeds = [r for r in rows if r["initial"]]
    if not seeds:  # the run folder goes with the scratch directory: its log's last error is the reason
        said = [ln for ln in _read(workdir / "results" / "evolution_run.log").splitlines() if "ERROR" in ln]
        raise RuntimeError("ShinkaEvolve did not evaluate the initial program" + (f": {said[-1]}" if said else ""))
    t0, sim0 = seeds[0]["t"], seeds[0]["sim_t"]
    history, best, best_text = [], None, None
    for r in rows:
        if r["ok"] and (best is None or r["score"] > best):
            best, best_text = r["score"], r["text"]
            history.append([max(0.0, r["t"] - t0), best])
    proposed = [r for r in rows if r is not seeds[0]]
    # The pipeline ends with the last evaluation: after it Shinka only winds down (final summaries,
    # its 0.5 s waits for background work), which a virtual clock counts at wall time x scale.
    sim_last = max(r["sim_t"] for r in rows)
    return {"proposals": proposals, "evaluated": len(proposed), "pipeline_minutes": (sim_last - sim0) / 60.0,
            "run_minutes": (sim_end - sim0) / 60.0, "wall_s": max(r["t"] for r in rows) - t0,
            "best_score": best, "seed_score": seeds[0]["score"], "accepted": sum(1 for r in proposed if r["ok"]),
            "best_history": history, "best_text": best_text}


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""
