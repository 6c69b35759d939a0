"""Builds a program-task run the way engine.run.runner does (its kind's handlers running the configured strategy)."""

from __future__ import annotations

import time
from pathlib import Path

from engine.config import build_config
from engine.pipeline.orchestrator import Orchestrator
from engine.run.setup import build_context
from engine.run.runner import new_run_id
from engine.stages.kinds import build_handlers
from engine.stages.program_stages import ProgramStages
from engine.store.store import Store


async def run_program(task, db: Path, layers: dict) -> tuple[Orchestrator, ProgramStages, str]:
    config = build_config([("defaults of task.toml", task.defaults), ("test", layers)])
    store = await Store.open(db, create=True)
    run_id = new_run_id()
    ctx, _ = await build_context(run_id, config, task, store)
    store.insert_run(run_id, task=task.name, task_path=str(task.path), config_json=config.model_dump_json(),
                     seed=config.seed, mode=config.pipeline.mode, policy=config.pipeline.policy,
                     backend=ctx.backend, status="running", created_at=time.time())
    stages = build_handlers(ctx)
    assert isinstance(stages, ProgramStages)
    orch = Orchestrator(ctx, stages)
    ctx.call_sink.target = orch.recorder.llm_call
    try:
        await stages.evaluate_seed()
        status = await orch.run([])
    finally:
        await ctx.task_llm.aclose()
        await store.close()
    return orch, stages, status
