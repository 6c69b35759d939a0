"""The bench's held-out quality: each run's final best, re-scored on what no run selected on.

Why: a row's `best` is the highest *validation* score among the candidates the run validated,
and each validation is one noisy draw (the task model answers at temperature). The maximum of
many draws rises with the number of draws, so a mode that fully validates more candidates
reports a higher `best` for prompts of the same true quality. On the rules task a prompt that
states every rule correctly scores 0.923 on average on the 30 validation examples, with a
standard deviation of 0.033 per validation; the best of 64 validations of such a prompt is
about 0.985 and the best of 128 about 0.989 (medians; `python -m evotui.bench.quality`).
`held` removes that bias: the best artifact each run ends with (evotui: the pool's best; GEPA: its best candidate) is
answered HELDOUT_REPEATS times on every example of the task's held-out split by the same
simulated task model, and the mean is reported. It runs after the run, outside its timing.
The backend is seeded with the bench seed, and each answer asks for the simulator's stage
`heldout` with a seed of its own (the example's and the repeat's position), whose randomness
comes from those seeds alone, not from the prompt. So every row of a seed is scored with the
same draws (common random numbers): two prompts that state the same rules get the same `held`
however they word them, and rows of one seed differ only where their prompts differ.

Program tasks score deterministically (no noise to select on), so `evotui bench` rows have no
`held`; the suite (bench_suite.py) re-scores a program task's final best with the task's held-out
evaluator (`program_heldout_score`), which checks the same objective more strictly.
"""

from __future__ import annotations

import asyncio
import math
import random
import statistics
import sys
from typing import Any

from engine.config import SIM_URL, EndpointConfig
from engine.llm.errors import LLMError
from engine.llm.sim.app import COMMON_DRAWS_STAGE as HELDOUT_STAGE

HELDOUT_REPEATS = 10
"""Answers per held-out example: 10 x 30 examples put the standard deviation of a rules
prompt's held-out mean at about a third of one validation's (0.033)."""
_CONCURRENCY = 32
_SIM_TIME_SCALE = 100000.0  # nothing here is timed


def available(task: Any) -> bool:
    return getattr(task, "kind", None) == "prompt" and bool(getattr(task, "heldout", None))


async def heldout_score(task: Any, text: str, seed: int, repeats: int = HELDOUT_REPEATS) -> float | None:
    """Mean score of `text` as the system prompt over the held-out split, `repeats` answers per
    example, from a fresh simulated backend seeded with the bench seed (every row alike)."""
    if not available(task):
        return None
    from engine.trace.llm import make_client
    from engine.trace.replay_prompt import ValScorer
    from engine.tasks.sim_behaviours import all_behaviours

    client = make_client(EndpointConfig(url=SIM_URL), {"sim": {"seed": seed, "time_scale": _SIM_TIME_SCALE}},
                         "bench-heldout", behaviours=tuple(all_behaviours()))
    scorer = ValScorer(task, client, concurrency=_CONCURRENCY)  # one example: the run's rollout, scored
    try:
        # Common random numbers: the simulator draws a `heldout` answer from its seed alone, so
        # the k-th answer to an example uses the same draws whatever the prompt, and two rows'
        # held-out scores differ by what their prompts say, not by sampling noise.
        scores = await asyncio.gather(*(scorer.one(text, ex, stage=HELDOUT_STAGE, seed=i * repeats + k)
                                        for i, ex in enumerate(task.heldout) for k in range(repeats)))
    except LLMError as exc:  # the row keeps its other figures; its `held` is left empty
        print(f"evotui: warning: held-out rollouts failed, the row has no held-out score: {exc}",
              file=sys.stderr, flush=True)
        return None
    finally:
        await client.aclose()
    return sum(scores) / len(scores)


async def program_heldout_score(task: Any, text: str) -> float | None:
    """The task's held-out evaluator's score of a program (in the sandbox, with the task's limits),
    None when the task has no held-out evaluator; an invalid program scores 0, as in a run."""
    evaluator = getattr(task, "heldout_evaluator", None)
    if getattr(task, "kind", None) != "program" or evaluator is None:
        return None
    from engine.sandbox import Sandbox

    s = task.settings
    ev = await Sandbox(s.limits(), concurrency=1).evaluate(evaluator, text, mode=task.sandbox_mode,
                                                           program_name=task.program_name)
    return float(ev.score) if ev.ok and ev.score is not None and math.isfinite(ev.score) else 0.0


def _noise_demo(validations: int = 2000) -> None:
    """Prints the validation-score distribution of a prompt stating every rule, and the median
    maximum over n validations (the selection bias `held` removes). The model is the simulator's
    rules plug-in, called directly."""
    from engine.tasks.loader import load_any_task
    from engine.tasks.ruleworld import RULES
    from engine.tasks.ruleworld_sim import answer_example

    task = load_any_task("rules")
    prompt = "Format the list on one line.\n" + "\n".join(r.statement for r in RULES)
    rng = random.Random(0)
    vals = [statistics.mean(task.score(ex, answer_example(prompt, ex, rng)).score for ex in task.val)
            for _ in range(validations)]
    print(f"a prompt stating every rule, {len(task.val)} validation examples, {validations} validations: "
          f"mean {statistics.mean(vals):.3f}, sd {statistics.pstdev(vals):.3f}")
    for n in (1, 16, 32, 64, 128, 256):
        maxima = [max(rng.sample(vals, n)) for _ in range(400)]
        print(f"  median of the best of {n:3} validations: {statistics.median(maxima):.3f}")


if __name__ == "__main__":
    _noise_demo(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
