"""Real OpenEvolve (the `openevolve` package's controller, unchanged) on an evotui program task,
against a simulated backend.

Ours is only the configuration and the evaluation file a user writes. The configuration is
OpenEvolve's `Config()` defaults with the repository's default `parallel_evaluations = 4`
(configs/default_config.yaml; the dataclass default is 1), the simulated endpoint as its one
model, and the bench's seed. The evaluation file hands each program to evotui's sandbox with
the task's limits (LLM-written code never runs unconfined) and appends one line per evaluation,
stamped with the simulated server's clock, to a log, from which the pipeline time (after the
initial program's evaluation, as evotui's), the best score over time and the best program (the
suite re-scores it held out) are read.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Callable

from engine.tasks.program_task import ProgramTask
from evotui.peers.chat import MODEL

PARALLEL_EVALUATIONS = 4

_EVALUATION_FILE = '''"""OpenEvolve evaluation file written by evotui's bench: each program runs in evotui's sandbox."""
import asyncio, json, os, pathlib, urllib.request

from engine.sandbox.core import Sandbox, SandboxLimits

EVALUATOR = {evaluator!r}
INITIAL = pathlib.Path({initial!r}).read_text()
LOG = {log!r}
LIMITS = SandboxLimits(**{limits!r})
METRICS = {metrics!r}


def sim_now():
    with urllib.request.urlopen(METRICS, timeout=30) as reply:
        return json.load(reply)["sim_now"]


def evaluate(program_path):
    text = pathlib.Path(program_path).read_text()
    res = asyncio.run(Sandbox(LIMITS, concurrency=1).evaluate(EVALUATOR, text, mode={mode!r}))
    score = res.score if res.ok and res.score is not None else 0.0
    line = json.dumps({{"t": sim_now(), "score": score, "ok": res.ok, "initial": text == INITIAL,
                        "text": text}}) + "\\n"
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    if not res.ok:
        return {{"combined_score": 0.0, "error": res.reason}}
    return {{**res.metrics, "combined_score": score}}
'''


def _limits(task: ProgramTask) -> dict:
    lim = task.settings.limits()
    return {"wall_s": lim.wall_s, "memory_mb": lim.memory_mb, "nproc": lim.nproc, "threads": lim.threads}


def evaluation_source(task: ProgramTask, initial: Path, log: Path, url: str) -> str:
    """The evaluation file OpenEvolve is given: the task's evaluator in evotui's sandbox, one log
    line per evaluation stamped with the simulated server's clock (`url`'s /sim/metrics)."""
    return _EVALUATION_FILE.format(evaluator=str(task.evaluator), mode=task.sandbox_mode, initial=str(initial),
                                   log=str(log), limits=_limits(task), metrics=f"{url}/sim/metrics")


def run(task: ProgramTask, url: str, seed: int, proposals: int, sim_clock: Callable[[], float], workdir: Path) -> dict:
    """One OpenEvolve run; times in simulated seconds of the server at `url` (sim_clock reads it)."""
    from openevolve.config import Config, LLMModelConfig
    from openevolve.controller import OpenEvolve

    workdir.mkdir(parents=True, exist_ok=True)
    initial = workdir / "initial_program.py"
    initial.write_text(task.initial_program)
    log = workdir / "evaluations.jsonl"
    evaluation_file = workdir / "evaluation.py"
    evaluation_file.write_text(evaluation_source(task, initial, log, url))
    config = Config()
    config.random_seed = seed
    config.max_iterations = proposals
    config.evaluator.parallel_evaluations = PARALLEL_EVALUATIONS
    llm = config.llm
    llm.api_base, llm.api_key = url, "simulated"
    # Models set after construction do not get the shared settings __post_init__ hands out.
    llm.models = [LLMModelConfig(name=MODEL, weight=1.0, api_base=url, api_key="simulated", random_seed=seed,
                                 temperature=llm.temperature, top_p=llm.top_p, max_tokens=llm.max_tokens,
                                 timeout=llm.timeout, retries=llm.retries, retry_delay=llm.retry_delay)]
    llm.evaluator_models = list(llm.models)
    controller = OpenEvolve(str(initial), str(evaluation_file), config, output_dir=str(workdir / "output"))
    wall_start, t_start = time.monotonic(), sim_clock()
    asyncio.run(controller.run(iterations=proposals))
    wall_s, t_end = time.monotonic() - wall_start, sim_clock()
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    seeds = [r for r in rows if r["initial"]]
    t0 = seeds[0]["t"] if seeds else t_start
    history, best, best_text = [], None, None
    for r in sorted(rows, key=lambda r: r["t"]):
        if best is None or r["score"] > best:
            best, best_text = r["score"], r["text"]
            history.append([max(0.0, r["t"] - t0), best])
    evaluated = sum(1 for r in rows if not r["initial"])
    return {"proposals": proposals, "evaluated": evaluated, "pipeline_minutes": (t_end - t0) / 60.0,
            "wall_s": wall_s, "best_score": best, "seed_score": seeds[0]["score"] if seeds else None,
            "accepted": evaluated, "best_history": history, "parallel_evaluations": PARALLEL_EVALUATIONS,
            "best_text": best_text}
