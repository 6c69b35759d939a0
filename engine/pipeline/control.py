"""Adaptive workflow control (FlashEvolve §3.4).

At every control interval the production rate of each LLM stage (items it finished per second,
over the meter's window) is compared with the median rate: a stage below half the median gets
one more worker, a stage above twice the median one fewer, always within its [min, max].
Only stages that produced something in the window take part, so an idle pipeline (paused,
draining) does not shuffle workers around.
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Callable, Collection

from engine.pipeline.stage import Stage

def decide(rates: dict[str, float]) -> dict[str, int]:
    """stage -> worker delta (+1, -1) by the half/double-the-median rule; pure, for tests."""
    active = {s: r for s, r in rates.items() if r > 0}
    if len(active) < 2:
        return {}
    median = statistics.median(active.values())
    deltas: dict[str, int] = {}
    for stage, rate in active.items():
        if rate < median / 2:
            deltas[stage] = 1
        elif rate > median * 2:
            deltas[stage] = -1
    return deltas


class AdaptiveController:
    def __init__(self, stages: dict[str, Stage], interval_s: float, resize: Callable[[str, int, str], int],
                 sleep: Callable[[float], object] = asyncio.sleep, controlled: Collection[str] | None = None) -> None:
        """controlled: the stages it may resize (the pipeline's scalable ones); None: all of `stages`."""
        self.stages = {n: s for n, s in stages.items() if controlled is None or n in controlled}
        self.interval_s = interval_s
        self.resize = resize
        self.sleep = sleep
        self.decisions = 0

    def step(self) -> dict[str, int]:
        rates = {name: stage.meter.rate() for name, stage in self.stages.items()}
        deltas = decide(rates)
        median = statistics.median([r for r in rates.values() if r > 0]) if deltas else 0.0
        for stage, delta in deltas.items():
            st = self.stages[stage]
            target = st.target_workers + delta
            if st.min_workers <= target <= st.max_workers:
                why = "below half" if delta > 0 else "above twice"
                self.resize(stage, target, f"rate {rates[stage]:.3f}/s {why} the median {median:.3f}/s")
                self.decisions += 1
        return deltas

    async def run(self) -> None:
        while True:
            await self.sleep(self.interval_s)
            self.step()
