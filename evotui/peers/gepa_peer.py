"""Real GEPA (`gepa.optimize`, unchanged) on an evotui prompt task, against a simulated backend.

Ours is only what a GEPA user writes: an adapter that runs a candidate prompt on examples (the
prompt as the system message, the example as the user message: the layout evotui's rollouts
use) and scores each answer with the task's own metric, and a reflection LM callable. GEPA's
engine, Pareto selection, minibatch acceptance, reflection template and its parsing are the
library's. Parallelism is stock GEPA's: a minibatch's examples go out 10 at a time (DefaultAdapter's
max_litellm_workers), PxN's reflections 10 at a time (gepa.LM.batch_complete's max_workers), and
the proposals of an iteration are evaluated one after another (no `batch_evaluate`: GEPA's
default_batch_evaluate fallback, which DefaultAdapter uses).
"""

from __future__ import annotations

import sys
import time
from typing import Callable

from engine.config import PipelineConfig
from engine.tasks.prompt_task import PromptTask
from evotui.peers.chat import Chat

COMPONENT = "system_prompt"
STOCK_WORKERS = 10
"""DefaultAdapter(max_litellm_workers=10) and gepa.LM.batch_complete(max_workers=10) in gepa 0.1.4."""
_MAX_ITERATIONS = 20
"""Iterations per proposal of the budget before a run is stopped as stuck (GEPA skips an
iteration whose parent is perfect on the minibatch, so some iterations propose nothing)."""


class TaskAdapter:
    """A GEPAAdapter over a PromptTask (duck-typed: gepa checks the methods, not a base class)."""

    propose_new_texts = None  # GEPA's own reflection proposes (the protocol's optional hook)

    def __init__(self, task: PromptTask, chat: Chat, on_full_validation: Callable[[float], None]) -> None:
        self.task, self.chat = task, chat
        self._on_full_validation = on_full_validation
        self._val_ids = set(task.val_ids)
        self.metric_calls = 0

    def _run(self, prompt: str, example: dict) -> dict:
        user = self.task.user_message(example)
        output = self.chat.complete([{"role": "system", "content": prompt}, {"role": "user", "content": user}])
        result = self.task.score(example, output)
        return {"input": user, "output": output, "score": result.score, "feedback": result.feedback}

    def evaluate(self, batch: list[dict], candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        prompt = candidate[COMPONENT]
        runs = self.chat.map(lambda ex: self._run(prompt, ex), list(batch))
        self.metric_calls += len(runs)
        scores = [r["score"] for r in runs]
        if len(batch) == len(self._val_ids) and {ex["id"] for ex in batch} == self._val_ids:
            self._on_full_validation(sum(scores) / len(scores))
        return EvaluationBatch(outputs=[r["output"] for r in runs], scores=scores,
                               trajectories=runs if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch, components_to_update: list[str]) -> dict:
        # The records GEPA's own DefaultAdapter builds (its reflection template renders them).
        records = [{"Inputs": t["input"], "Generated Outputs": t["output"], "Feedback": t["feedback"]}
                   for t in eval_batch.trajectories or []]
        return {name: records for name in components_to_update}


class _StderrLogger:
    """GEPA's per-iteration log to stderr (the bench keeps it for a failed row's message);
    stdout carries only the row."""

    def log(self, message: str) -> None:
        print(message, file=sys.stderr)


class ReflectionLM:
    """GEPA's reflection LM: a callable, with batch_complete for PxN; counts proposals."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.proposals = 0

    def __call__(self, prompt: str | list[dict]) -> str:
        self.proposals += 1
        return self.chat(prompt)

    def batch_complete(self, messages_list: list[list[dict]]) -> list[str]:
        self.proposals += len(messages_list)
        return self.chat.batch_complete(messages_list)


def run(task: PromptTask, url: str, seed: int, proposals: int, pxn: bool, sim_clock: Callable[[], float],
        best_only: bool = False) -> dict:
    """One gepa.optimize run; figures in the bench's row layout (times from the simulator's clock,
    from the end of the seed's validation, as evotui's pipeline time). pxn: PxNSampling(2, 4);
    best_only: of an iteration's improving proposals only the best enters (BestImprovement; the
    default AllImprovements admits every one)."""
    import gepa
    from gepa.strategies.proposal_sampling import PxNSampling
    from gepa.strategies.proposal_selection import AllImprovements, BestImprovement

    chat = Chat(url, max_workers=STOCK_WORKERS)
    wall0: list[float] = []
    sim0: list[float] = []
    best: list[float] = []
    history: list[list[float]] = []

    def on_full_validation(mean: float) -> None:
        if not wall0:  # the seed's validation: the pipeline starts now
            wall0.append(time.monotonic())
            sim0.append(sim_clock())
        if not best or mean > best[-1]:
            best.append(mean)
            history.append([time.monotonic() - wall0[0], mean])

    adapter = TaskAdapter(task, chat, on_full_validation)
    lm = ReflectionLM(chat)
    minibatch = PipelineConfig().minibatch_size
    try:
        result = gepa.optimize(
            seed_candidate={COMPONENT: task.seed_prompt}, trainset=list(task.train), valset=list(task.val),
            adapter=adapter, reflection_lm=lm, reflection_minibatch_size=minibatch, seed=seed,
            stop_callbacks=[lambda state: lm.proposals >= proposals or state.i >= _MAX_ITERATIONS * proposals],
            sampling_strategy=PxNSampling(2, 4) if pxn else None,
            selection_strategy=BestImprovement() if best_only else AllImprovements(), display_progress_bar=False,
            logger=_StderrLogger())
        sim_minutes = (sim_clock() - sim0[0]) / 60.0
        wall_s = time.monotonic() - wall0[0]
    finally:
        chat.close()
    scores = result.val_aggregate_scores
    return {"proposals": lm.proposals, "pipeline_minutes": sim_minutes, "wall_s": wall_s,
            "best_score": max(scores), "seed_score": scores[0], "accepted": len(scores) - 1,
            "llm_calls": chat.calls, "metric_calls": adapter.metric_calls, "best_history": history,
            "minibatch_size": minibatch, "best_text": result.best_candidate[COMPONENT]}
