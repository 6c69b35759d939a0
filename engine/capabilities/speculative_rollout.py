"""Speculative rollout completion (FlashEvolve §3.3, issue 36): release an item to reflection once a
fraction of its minibatch answers are in.

Why: the rollout stage runs the parent on every minibatch example and, without this, waits for
the slowest answer (output lengths have a long tail) before the proposer can start. With
`[pipeline] speculative_rollout = f` the stage hands the item on as soon as ceil(f * n) answers
have finished and at least one of them is below the task's max score (an all-perfect prefix
could still be a perfect minibatch, which GEPA skips, so it waits on); the other requests keep
running. The proposer reflects on the finished traces only, and the item says which
(item.rollout_release, stored as `speculative_rollout`: seen / of / late). The late traces are joined at the start of the
evaluate stage, before the minibatch gate, which compares child and parent on the whole
minibatch; they are on the item (and so in its stored row and the export) from then on. An item
that ends before its evaluation (a failed proposal, a stale discard) cancels what is still running
and keeps what finished; after a resume the missing examples are run again at the join.

Mode chain has no rollout stage of this kind (a step's traces are the gate's answers on the
next minibatch), so the configuration refuses the option there; program and adapter kinds have
no per-example rollout (set-up refuses it).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import Awaitable, Callable, Protocol

from engine.context import RunContext
from engine.items import Rollout, RolloutRelease, WorkItem
from engine.stages.answers import gather_cancelling

KEY = "speculative_rollout"
"""The stored key of the item's RolloutRelease (engine/items/products.py): what the proposer saw and what came late."""


class RolloutHost(Protocol):
    ctx: RunContext
    run_example: Callable[[str, str, str], Awaitable[dict]]
    """(prompt text, example id, stage) -> one trace (example_id, input, output, score, feedback)."""


def needed(fraction: float, n: int) -> int:
    """Answers to wait for before release: ceil(fraction * n), at least one."""
    return max(1, min(n, math.ceil(fraction * n - 1e-9)))


class SpeculativeRollout:
    def __init__(self, host: RolloutHost, fraction: float) -> None:
        self.host = host
        self.fraction = fraction
        self._late: dict[str, tuple[str, dict[str, asyncio.Future]]] = {}
        """item id -> (the text rolled out, example id -> its still running request)."""

    async def run(self, item: WorkItem, text: str) -> list[dict]:
        """The minibatch traces to hand on, in minibatch order: all of them, or the finished
        part once the release condition holds (the rest keep running for join())."""
        ids = list(item.minibatch)
        tasks = {ex: asyncio.ensure_future(self.host.run_example(text, ex, "rollout")) for ex in ids}
        need, top = needed(self.fraction, len(ids)), self.host.ctx.task.max_score
        done: dict[str, dict] = {}
        try:
            while len(done) < len(ids):
                await asyncio.wait([t for ex, t in tasks.items() if ex not in done],
                                   return_when=asyncio.FIRST_COMPLETED)
                for ex, task in tasks.items():
                    if ex not in done and task.done():
                        done[ex] = task.result()  # a failed request raises: the rest are cancelled below
                if len(done) >= need and len(done) < len(ids) and any(t["score"] < top for t in done.values()):
                    break
        except BaseException:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            raise
        late = {ex: task for ex, task in tasks.items() if ex not in done}
        if late:
            self._late[item.item_id] = (text, late)
        item.rollout_release = RolloutRelease([ex for ex in ids if ex in done], len(ids), len(late))
        return [done[ex] for ex in ids if ex in done]

    async def join(self, item: WorkItem) -> None:
        """Before the gate: the whole minibatch on the item (awaits the late answers; after a
        resume, runs the examples whose answers were never stored)."""
        record = item.rollout_release
        if record is None or record.joined or item.rollout is None:
            return
        have = {t["example_id"]: t for t in item.rollout.traces or []}
        entry = self._late.pop(item.item_id, None)
        if entry is not None:
            late = list(entry[1].items())
            traces = await gather_cancelling([task for _, task in late])
        else:  # resumed: the requests that were running died with the process
            late = [(ex, None) for ex in item.minibatch if ex not in have]
            text = self.host.ctx.pool.get(item.rollout.parent_mb_of).text
            traces = await gather_cancelling([asyncio.ensure_future(self.host.run_example(text, ex, "rollout"))
                                              for ex, _ in late])
        have.update({ex: tr for (ex, _), tr in zip(late, traces)})
        full = [have[ex] for ex in item.minibatch]
        item.rollout = Rollout(full, [t["score"] for t in full], item.rollout.parent_mb_of)
        item.rollout_release = replace(record, joined=True)

    def ended(self, item: WorkItem) -> None:
        """An item that ends before its join: what still runs is cancelled (no one will read it),
        what finished is added to its traces, after the ones the proposer saw."""
        entry = self._late.pop(item.item_id, None)
        if entry is None or item.rollout is None:
            return
        finished, cancelled = [], 0
        for ex, task in entry[1].items():
            if task.done() and not task.cancelled() and task.exception() is None:
                finished.append(task.result())
            else:
                if not task.done():
                    task.cancel()
                    cancelled += 1
                elif not task.cancelled():
                    task.exception()  # retrieved: a failure of an answer no one needs is not an error
        traces = list(item.rollout.traces or []) + finished
        item.rollout = Rollout(traces, [t["score"] for t in traces], item.rollout.parent_mb_of)
        if item.rollout_release is not None:  # run() set it when it left answers running
            item.rollout_release = replace(item.rollout_release, late_finished=len(finished), cancelled=cancelled)
