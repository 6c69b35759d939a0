"""Frozen data for snapshot tests: a backend whose frames never change."""

from __future__ import annotations

import time
from types import MappingProxyType

from engine.run.history import RunHistory
from engine.pipeline.review import PendingReview
from engine.run.snapshot import EngineSnapshot, LLMSnapshot, StageSnapshot
from evotui.tui.app import EvoApp
from evotui.tui.backend import ArtifactView, Backend, Frame, LLMStat
from evotui.tui.launch import prepare
from evotui.tui.screens.lineage import LineageTree

SEED = "You are a helpful assistant. Format the given items as a list on a single line."
CHILD = SEED + "\nJoin the items with ' ; ' (a semicolon with a space on each side)."
BETTER = CHILD + "\nWrite every item in lower case."


def frozen_snapshot() -> EngineSnapshot:
    stages = tuple(StageSnapshot(name, depth, 16, busy, 8, blocked, rate, 40, 2)
                   for name, depth, busy, blocked, rate in [
                       ("rollout", 3, 8, 0, 1.6), ("propose", 16, 8, 2, 1.2), ("evaluate", 5, 6, 0, 1.1),
                       ("update", 0, 1, 0, 0.9), ("reflect", 0, 0, 0, 0.0)])
    return EngineSnapshot(
        run_id="r20260101-120000-abcd", state="running", mode="async", policy="guarded", backend="simulated:vllm",
        simulated=True, elapsed_s=1.25, pool_version=14, pool_size=14, seed_score=0.032, best_score=0.539,
        best_id="a000016", in_flight_items=8, stages=stages, gap_histogram=MappingProxyType({0: 40, 1: 12, 2: 5, 3: 1}),
        staleness=MappingProxyType({"pass": 57, "discard": 1}), proposals=22, proposal_attempts=23, accepted=14,
        rejected=6, failed=1, discarded_stale=1, wasted_tokens=1200,
        llm=(LLMSnapshot("task", "http://sim/v1", 12, 610, 2, 3), LLMSnapshot("reflection", "http://sim/v1", 2, 23, 0, 0)),
        llm_calls=633, prompt_tokens=58000, completion_tokens=760000,
        budget_spent=MappingProxyType({"proposals": 22.0, "llm_calls": 633.0, "tokens": 818000.0, "metric_calls": 570.0, "wall_s": 1.25}),
        budget_limits=MappingProxyType({"proposals": 40.0, "llm_calls": None, "tokens": None, "metric_calls": None, "wall_s": None}),
        budget_exhausted=None, max_gap=2, review_pending=2, speculation=False,
        review_gates=MappingProxyType({"evaluate": True, "update": False}),
        calls_by_stage=MappingProxyType({"reflect": 23, "rollout": 610}),
        tokens_by_stage=MappingProxyType({"reflect": 71000, "rollout": 747000}),
    )


def frozen_history() -> RunHistory:
    """Ten simulated minutes of a run (1.5 wall seconds at x400), built from fixed formulas."""
    h = RunHistory(start=0.0, time_scale=400.0, simulated=True)
    for i in range(30):
        t = i * 0.05
        h.add_scores(t, 0.032 + 0.5 * min(i, 12) / 12, 0.03 + 0.3 * min(i, 20) / 20)
        h.add_proposals(t, 1 + i % 3)
        h.add_depths(t, {"rollout": i % 5, "propose": min(16, i), "evaluate": (i * 3) % 7, "update": i % 2})
        for k in range(20):
            h.add_call(t + k * 0.002, 0.01 + 0.002 * ((i + k) % 9), 900 + 10 * k)
    h.set_gaps({0: 40, 1: 12, 2: 5, 3: 1})
    return h


FROZEN_SPEND = {
    "usd": 0.3102, "gpu_hours": 0.0125,
    "by_stage": {"reflect": {"calls": 23, "usd": 0.3102, "gpu_s": 0.0}, "rollout": {"calls": 610, "usd": 0.0, "gpu_s": 45.0}},
    "by_model": {"gpt-4.1-mini": {"calls": 23, "usd": 0.3102, "gpu_s": 0.0},
                 "Qwen/Qwen3-8B": {"calls": 610, "usd": 0.0, "gpu_s": 45.0}},
    "by_endpoint": {}, "unpriced_models": []}
"""Spend of the frozen run: a hosted reflection model in dollars, a local task model in GPU time."""
FROZEN_GPU = {"gpus": ["0", "1"], "vendor": "cuda", "per_gpu": 2, "slots": 4, "busy": 3, "by_gpu": {"0": 2, "1": 1},
              "memory_fraction": None, "leases": 57}


class FrozenBackend(Backend):
    source = "frozen"
    can_control = False

    def __init__(self) -> None:
        self.snap = frozen_snapshot()
        self.history = frozen_history()
        self._polled = False
        self.clock = time.time
        """Wall time the pending items' ages count from (snapshot tests fix it)."""

    def frame(self) -> Frame:
        return Frame(
            snap=self.snap,
            llm=(LLMStat("task", 12, 610, 2, 3, 0.84, 2.91, 52000, 700000), LLMStat("reflection", 2, 23, 0, 0, 4.2, 9.8, 6000, 60000)),
            decisions=("i000031 propose gap 3 -> discard", "i000029 review@evaluate -> approve"),
            time_scale=400.0, source=self.source, can_control=self.can_control, history=self.history,
            history_rev=self.history.revision, history_now=1.5, spend=FROZEN_SPEND, gpu=FROZEN_GPU)

    def poll(self) -> list[str]:
        if self._polled:
            return []
        self._polled = True
        return [f"12:00:{i:02d} candidate_accepted item_id=i0000{i:02d} artifact_id=a0000{i:02d} val_mean=0.{i}" for i in range(10, 20)]

    def artifacts(self) -> list[ArtifactView]:
        return [
            ArtifactView("a000000", None, 1, "seed", 0.032, SEED),
            ArtifactView("a000004", "a000000", 2, "confirmed", 0.293, CHILD, "approve at evaluate"),
            ArtifactView("a000016", "a000004", 9, "confirmed", 0.539, BETTER, "edit at evaluate"),
            ArtifactView("i000012", "a000004", 0, "rejected", None, "", "reject at evaluate: too long"),
        ]

    def pending(self) -> list[PendingReview]:
        now = self.clock()
        return [PendingReview("i000033", "evaluate", "a000016", BETTER, BETTER.replace("lower", "upper"), now - 42),
                PendingReview("i000034", "evaluate", "a000004", CHILD, CHILD + "\nNo trailing spaces.", now - 7)]


def themed_app(backend: Backend, theme: str = "evotui-dark") -> EvoApp:
    """The app on `backend`, with a theme chosen as the command line would."""
    app = EvoApp(backend)
    app._theme_name = prepare(app, theme, [])
    return app


def frozen_app() -> EvoApp:
    return themed_app(FrozenBackend())


async def lineage_settled(pilot) -> None:
    """Wait until the lineage screen's first placement landed: the cursor on the best and the tree
    scrolled to it (a frame after the cursor moved), its scroll offset still between two frames.
    Under load that can take several frames more than one pause."""
    screen = pilot.app.screen
    tree = screen.query_one(LineageTree)
    last = None
    for _ in range(100):
        pilot.app.sampler.tick()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        chosen = screen.selected()
        node = screen._tree_nodes.get(screen._best_id or "")
        offset = tree.scroll_offset
        shown = node is not None and offset.y <= node.line < offset.y + tree.size.height
        if chosen is not None and chosen.artifact_id == screen._best_id and shown and offset == last:
            break
        last = offset
    await pilot.pause()
