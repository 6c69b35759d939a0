"""`evotui replay` of a prompt task's candidate: each reply to the saved propose prompt is read the
way the run's propose stage reads it (engine/stages/reflection.py: the last fenced block, or the
`### [name]` blocks of the components the proposal rewrote), and the new prompt is scored the way
the run validated the recorded child: every validation example answered by the run's task model
(the candidate as system prompt, the task's user message) and scored by the task's metric; the
mean is comparable with the recorded val_mean.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.llm.errors import LLMError
from engine.trace.errors import TraceError

CONCURRENCY = 8


def child_of(reply: str, parent: dict[str, Any], cand: dict[str, Any]) -> tuple[str | None, str]:
    """(the new prompt, "") or (None, why not), as the propose stage parses a reply."""
    from engine import components
    from engine.stages import reflection

    raw = parent.get("components")
    parts = components.from_json(raw) if raw else None
    if parts is None:
        child = reflection.parse_instructions(reply)
        if child is None:
            return None, "no parsable instructions block"
        if child.strip() == (parent["source"] or "").strip():
            return None, "no change from parent"
        return child, ""
    changed = ((cand.get("item") or {}).get("payload") or {}).get("changed_components")
    targets = list(changed) if changed else components.evolvable(parts)
    child, _names, why = reflection.parse_component_reply(reply, parts, targets)
    if child is None:
        return None, why
    kept, _, refused = components.enforce_rendering(parts, child)  # the run's rules, as propose applies them
    if kept is None:
        return None, "component update refused: " + "; ".join(m for _, m in refused.values())
    return kept, why


class ValScorer:
    """The mean metric score of a prompt over the task's validation examples (the run's task model)."""

    def __init__(self, task: Any, client: Any, concurrency: int = CONCURRENCY) -> None:
        self.task, self.client = task, client
        self.sem = asyncio.Semaphore(concurrency)

    async def one(self, prompt: str, example: dict, stage: str = "rollout", seed: int | None = None) -> float:
        async with self.sem:
            res = await self.client.chat([{"role": "system", "content": prompt},
                                          {"role": "user", "content": self.task.user_message(example)}],
                                         stage=stage, seed=seed)
        return self.task.score(example, res.text).score

    async def score(self, prompt: str) -> tuple[float | None, str]:
        try:
            scores = await asyncio.gather(*(self.one(prompt, ex) for ex in self.task.val))
        except LLMError as exc:
            if exc.fatal:
                raise TraceError(f"the task endpoint is unusable: {exc}") from None
            return None, f"task model call failed: {exc.kind}"
        return sum(scores) / len(scores), ""


def task_client(run_config: dict[str, Any], sim: bool):
    """The run's task-model endpoint (the simulator when the run used it or with --llm sim)."""
    from engine.tasks.sim_behaviours import all_behaviours
    from engine.trace.llm import Choice, endpoint_config, make_client

    cfg = endpoint_config(run_config, "task_llm", Choice(sim=sim))
    return make_client(cfg, run_config, "replay-task", behaviours=tuple(all_behaviours()))
