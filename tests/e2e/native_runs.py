"""Small runs of the real peers, for the import tests: `python -m tests.e2e.native_runs KIND OUT`.

openevolve: OpenEvolve's controller, 4 iterations on circle_packing with a checkpoint every 2
(the bench's evaluation file: each program runs in evotui's sandbox). gepa: gepa.optimize with
run_dir=OUT on rules until 4 proposals. Both against a fresh `evotui sim-server` on loopback
(evotui/peers/sim_endpoint.py), in this process of their own so the peers' pools and signal
handlers never touch pytest's."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from engine.tasks.loader import load_any_task
from evotui.peers import gepa_peer, openevolve_peer
from evotui.peers.chat import MODEL, Chat
from evotui.peers.sim_endpoint import SimEndpoint

ITERATIONS = 4


def openevolve_run(out: Path, url: str) -> None:
    from openevolve.config import Config, LLMModelConfig
    from openevolve.controller import OpenEvolve

    task = load_any_task("circle_packing")
    out.mkdir(parents=True)
    initial = out / "initial_program.py"
    initial.write_text(task.initial_program)
    evaluation = out / "evaluation.py"
    evaluation.write_text(openevolve_peer.evaluation_source(task, initial, out / "log.jsonl", url))
    config = Config()
    config.random_seed, config.max_iterations, config.checkpoint_interval = 0, ITERATIONS, 2
    llm = config.llm
    llm.models = [LLMModelConfig(name=MODEL, weight=1.0, api_base=url, api_key="simulated", random_seed=0,
                                 temperature=llm.temperature, top_p=llm.top_p, max_tokens=llm.max_tokens,
                                 timeout=llm.timeout, retries=llm.retries, retry_delay=llm.retry_delay)]
    llm.evaluator_models = list(llm.models)
    controller = OpenEvolve(str(initial), str(evaluation), config, output_dir=str(out / "output"))
    asyncio.run(controller.run(iterations=ITERATIONS))


def gepa_run(out: Path, url: str) -> None:
    import gepa

    task = load_any_task("rules")
    chat = Chat(url)
    adapter = gepa_peer.TaskAdapter(task, chat, lambda mean: None)
    lm = gepa_peer.ReflectionLM(chat)
    try:
        gepa.optimize(seed_candidate={gepa_peer.COMPONENT: task.seed_prompt}, trainset=list(task.train),
                      valset=list(task.val), adapter=adapter, reflection_lm=lm, reflection_minibatch_size=3, seed=0,
                      run_dir=str(out), display_progress_bar=False, logger=gepa_peer._StderrLogger(),
                      stop_callbacks=[lambda state: lm.proposals >= ITERATIONS or state.i >= 10 * ITERATIONS])
    finally:  # the adapter holds no pool of its own (stock GEPA parallelism: the chat's)
        chat.close()


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING)
    kind, out = argv[0], Path(argv[1])
    with SimEndpoint("vllm", 0, 2000.0) as sim:
        {"openevolve": openevolve_run, "gepa": gepa_run}[kind](out, sim.url)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
