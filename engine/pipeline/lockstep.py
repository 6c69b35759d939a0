"""Lockstep admission (mode pxn, GEPA's PxNSampling): a step is P parents x N mutations, and
each stage runs the whole step at once and waits for its slowest item before the next stage
starts. Mixed into the Orchestrator, which owns admission, the stages and the run state."""

from __future__ import annotations

import asyncio

from engine.items import WorkItem
from engine.pipeline.spec import Selection


class LockstepAdmission:
    """Uses the Orchestrator's running/_stopped events, _draining, in_flight, _wait_until(),
    persisted(), _admit_merge(), _admit_one(), handlers, spec and stages."""

    async def _admit_steps(self, parents: int, mutations: int) -> None:
        """pxn: P parents x N mutations per step; every stage waits for its slowest item."""
        while not self._draining:
            await self._wait_until(lambda: (self.running.is_set() and self.in_flight == 0) or self._draining
                                   or self._stopped.is_set())
            if self._stopped.is_set():
                break
            if self._draining:
                break
            await self.persisted()
            merge_item = self._admit_merge()
            batch: list[WorkItem] = [merge_item] if merge_item is not None else []
            full = False
            for _ in range(parents):
                chosen = self.handlers.select()
                for n in range(mutations):
                    # N mutations of one parent, each on its own minibatch (the parent's pick is the first's).
                    mb = chosen.minibatch if n == 0 else self.handlers.select().minibatch
                    # The step's own items are not running yet: never wait for them here.
                    item = await self._admit_one(Selection(chosen.parent_id, mb, chosen.tags), wait=False)
                    if item is None:
                        full = True
                        break
                    batch.append(item)
                if full or self._draining:
                    break
            await self._run_lockstep(batch)

    async def _run_lockstep(self, batch: list[WorkItem]) -> None:
        for name in self.spec.names:
            if not batch:
                return
            await self.running.wait()
            stage = self.stages[name]
            # Items that enter later in the pipeline (merges) wait until their stage comes.
            here = [item for item in batch if item.stage == name]
            later = [item for item in batch if item.stage != name]
            for item in here:
                stage.mark_enqueued(item)
            results = await asyncio.gather(*(stage.run_one(item) for item in here))
            batch = later + [r for r in results if isinstance(r, WorkItem)]
