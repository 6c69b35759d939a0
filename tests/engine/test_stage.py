"""Pipeline stages: flow, backpressure, pause/resume, resizing, crashes, drops and the rate meter.

No real sleeps: progress is driven by asyncio.Event gates and bounded `sleep(0)` loops.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from engine.items import WorkItem
from engine.pipeline.stage import RateMeter, Stage


class Hooks:
    """Records every hook call; `drop` maps item ids to a drop reason."""

    def __init__(self, drop: dict[str, str] | None = None) -> None:
        self.drop = drop or {}
        self.started: list[tuple[str, str]] = []
        self.finished: list[tuple[str, str, str]] = []
        self.crashed: list[tuple[str, str, BaseException]] = []

    def item_started(self, stage: Stage, item: WorkItem) -> str | None:
        self.started.append((stage.name, item.item_id))
        return self.drop.get(item.item_id)

    def item_finished(self, stage: Stage, item: WorkItem, started_at: float, outcome: str) -> None:
        assert isinstance(started_at, float)
        self.finished.append((stage.name, item.item_id, outcome))

    def handler_crashed(self, stage: Stage, item: WorkItem, exc: BaseException) -> None:
        self.crashed.append((stage.name, item.item_id, exc))


class Gated:
    """A handler whose calls block until their item's gate (or the shared gate) opens."""

    def __init__(self, forward: bool = True) -> None:
        self.forward = forward
        self.open_all = asyncio.Event()
        self.gates: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.calls: list[str] = []
        self.done: list[str] = []
        self.active = 0
        self.peak = 0

    def release(self, item_id: str) -> None:
        self.gates[item_id].set()

    async def __call__(self, item: WorkItem) -> WorkItem | None:
        self.calls.append(item.item_id)
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            gate = self.gates[item.item_id]
            waiters = [asyncio.ensure_future(gate.wait()), asyncio.ensure_future(self.open_all.wait())]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
        finally:
            self.active -= 1
        self.done.append(item.item_id)
        return item if self.forward else None


def item(item_id: str) -> WorkItem:
    return WorkItem(item_id=item_id, created_version=0, parent_id="p", minibatch=["e1"], stage="", created_at=0.0)


async def settle(predicate, limit: int = 200) -> None:
    """Let the loop run until predicate() holds; fail (instead of hanging) after `limit` turns."""
    for _ in range(limit):
        if predicate():
            return
        await asyncio.sleep(0)
    assert predicate(), "condition not reached"


async def spin(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.fixture
async def stages():
    made: list[Stage] = []
    running = asyncio.Event()
    running.set()

    def make(name: str, handler, *, capacity: int = 10, workers: int = 1, hooks: Hooks | None = None, **kw) -> Stage:
        st = Stage(name, handler, capacity=capacity, workers=workers, hooks=hooks or Hooks(), running=running, **kw)
        made.append(st)
        return st

    make.running = running  # type: ignore[attr-defined]
    yield make
    for st in made:
        await st.stop()


# -- flow -------------------------------------------------------------------------------------------


async def test_items_flow_through_two_chained_stages(stages) -> None:
    hooks = Hooks()
    seen_b: list[tuple[str, str, list]] = []

    async def first(it: WorkItem) -> WorkItem:
        it.notes = {"trace": it.item_id.upper()}  # what the first stage puts on the item
        return it

    async def second(it: WorkItem) -> None:
        seen_b.append((it.item_id, it.stage, [it.notes["trace"]]))
        if it.item_id == "i2":
            it.outcome = "accepted"
        return None

    a = stages("a", first, hooks=hooks)
    b = stages("b", second, hooks=hooks)
    a.downstream = b
    a.start()
    b.start()
    assert a.workers == 1 and b.workers == 1
    for i in range(5):
        await a.put(item(f"i{i}"))
    await settle(lambda: len(seen_b) == 5)
    # one worker each: FIFO order is kept end to end
    assert seen_b == [(f"i{i}", "b", [f"I{i}"]) for i in range(5)]
    assert a.stats.taken == a.stats.forwarded == 5 and a.stats.ended == 0
    assert b.stats.taken == b.stats.ended == 5 and b.stats.forwarded == 0
    assert a.meter.total == 5 and b.meter.total == 5  # the meter counts every item a stage finished
    assert [f for f in hooks.finished if f[0] == "a"] == [("a", f"i{i}", "forwarded") for i in range(5)]
    outcomes = {iid: out for st, iid, out in hooks.finished if st == "b"}
    assert outcomes == {"i0": "done", "i1": "done", "i2": "accepted", "i3": "done", "i4": "done"}
    assert a.depth == b.depth == 0
    await asyncio.wait_for(a.queue.join(), 1)
    await asyncio.wait_for(b.queue.join(), 1)


async def test_put_stamps_stage_name_and_enqueue_time(stages) -> None:
    s = stages("evaluate", Gated())
    it = item("x")
    await s.put(it)
    assert it.stage == "evaluate"
    assert it.enqueued_at > 0
    assert s.depth == 1  # not started: nothing takes it


async def test_last_stage_ends_items_even_when_handler_returns_them(stages) -> None:
    async def echo(it: WorkItem) -> WorkItem:
        return it

    s = stages("update", echo)
    s.start()
    await s.put(item("x"))
    await settle(lambda: s.stats.ended == 1)
    assert s.stats.forwarded == 0 and s.meter.total == 1


# -- backpressure ------------------------------------------------------------------------------------


async def test_full_downstream_queue_blocks_the_upstream_worker(stages) -> None:
    async def passthrough(it: WorkItem) -> WorkItem:
        return it

    slow = Gated(forward=False)
    a = stages("a", passthrough, capacity=10, workers=1)
    b = stages("b", slow, capacity=1, workers=1)
    a.downstream = b
    a.start()
    b.start()
    for i in range(3):
        await a.put(item(f"i{i}"))
    # i0 is in b's handler, i1 fills b's queue (capacity 1), i2 waits in a's worker
    await settle(lambda: a.blocked == 1)
    await spin()
    assert a.blocked == 1
    assert b.busy == 1 and b.depth == 1
    assert slow.calls == ["i0"]
    assert a.stats.forwarded == 2
    assert a.depth == 0

    slow.open_all.set()
    await settle(lambda: b.stats.ended == 3)
    assert a.blocked == 0 and a.stats.forwarded == 3
    assert slow.done == ["i0", "i1", "i2"]


# -- pause / resume ----------------------------------------------------------------------------------


async def test_pause_holds_outputs_and_starts_nothing_new(stages) -> None:
    hooks = Hooks()
    up = Gated(forward=True)
    down = Gated(forward=False)
    down.open_all.set()
    a = stages("a", up, hooks=hooks)
    b = stages("b", down, hooks=hooks)
    a.downstream = b
    a.start()
    b.start()
    await a.put(item("i0"))
    await settle(lambda: a.busy == 1)

    stages.running.clear()  # pause
    await a.put(item("i1"))
    up.release("i0")  # the in-flight handler finishes during the pause
    await settle(lambda: a.stats.forwarded == 1)
    await spin(50)
    assert up.done == ["i0"]
    assert up.calls == ["i0"], "no new item started while paused"
    assert down.calls == [], "downstream starts nothing while paused"
    # the output waits at the downstream stage: in its queue, or taken by a worker
    # that was already waiting on the queue when the pause began (counted in `held`)
    assert b.depth + b.held == 1
    assert b.stats.taken == 0
    assert a.depth == 1 and a.held == 0
    assert hooks.started == [("a", "i0")]

    up.release("i1")
    stages.running.set()  # resume
    await settle(lambda: b.stats.ended == 2)
    assert up.calls == ["i0", "i1"]
    assert down.calls == ["i0", "i1"]
    assert a.depth == b.depth == 0


async def test_output_of_in_flight_item_waits_in_downstream_queue_while_paused(stages) -> None:
    up = Gated(forward=True)
    down = Gated(forward=False)
    a = stages("a", up)
    b = stages("b", down)
    a.downstream = b
    a.start()
    b.start()
    await b.put(item("z"))  # keeps b's only worker busy
    await a.put(item("i0"))
    await settle(lambda: a.busy == 1 and b.busy == 1)
    stages.running.clear()
    up.release("i0")
    down.release("z")  # b's worker finishes z during the pause
    await settle(lambda: b.depth == 1 and down.done == ["z"])
    await spin(50)
    assert b.depth == 1 and b.held == 0, "i0 sits in b's queue"
    assert down.calls == ["z"]
    down.release("i0")
    stages.running.set()
    await settle(lambda: b.stats.ended == 2)
    assert down.done == ["z", "i0"]


async def test_item_taken_as_pause_begins_is_held_until_resume(stages) -> None:
    handler = Gated(forward=False)
    handler.open_all.set()
    s = stages("a", handler)
    s.start()
    await spin()  # the worker is now waiting on the empty queue
    stages.running.clear()
    await s.put(item("x"))
    await settle(lambda: s.held == 1)
    await spin()
    assert s.held == 1 and s.depth == 0
    assert handler.calls == [] and s.stats.taken == 0
    stages.running.set()
    await settle(lambda: s.stats.ended == 1)
    assert s.held == 0 and handler.calls == ["x"]


# -- resizing ----------------------------------------------------------------------------------------


async def test_resize_up_spawns_workers_that_run_concurrently(stages) -> None:
    handler = Gated(forward=False)
    s = stages("rollout", handler, workers=1, max_workers=4)
    s.start()
    for i in range(5):
        await s.put(item(f"i{i}"))
    await settle(lambda: s.busy == 1)
    await spin()
    assert handler.active == 1 and s.depth == 4

    assert s.resize(3) == 3
    assert s.workers == 3
    await settle(lambda: s.busy == 3)
    assert handler.active == 3 and s.depth == 2

    assert s.resize(100) == 4  # clamped to max_workers
    await settle(lambda: s.busy == 4)
    assert handler.peak == 4

    handler.open_all.set()
    await settle(lambda: s.stats.ended == 5)
    assert s.workers == 4 and s.busy == 0


async def test_resize_down_retires_idle_workers_but_never_below_min(stages) -> None:
    handler = Gated(forward=False)
    handler.open_all.set()
    s = stages("propose", handler, workers=4, min_workers=2)
    s.start()
    await spin()  # all four are idle on the empty queue
    assert s.workers == 4
    assert s.resize(3) == 3
    assert s.workers == 3
    assert s.resize(0) == 2
    assert s.workers == 2
    await spin()
    assert s.workers == 2
    # the survivors still serve
    for i in range(4):
        await s.put(item(f"i{i}"))
    await settle(lambda: s.stats.ended == 4)
    assert s.workers == 2


async def test_busy_workers_retire_after_their_item(stages) -> None:
    handler = Gated(forward=False)
    s = stages("evaluate", handler, workers=3, min_workers=1)
    s.start()
    for i in range(3):
        await s.put(item(f"i{i}"))
    await settle(lambda: s.busy == 3)
    assert s.resize(1) == 1
    assert s.workers == 3, "busy workers are not cancelled mid-item"
    handler.release("i0")
    await settle(lambda: s.workers == 2)
    handler.release("i1")
    await settle(lambda: s.workers == 1)
    handler.release("i2")
    await settle(lambda: s.stats.ended == 3)
    await spin()
    assert s.workers == 1
    assert handler.done == ["i0", "i1", "i2"]


async def test_busy_workers_finishing_together_keep_the_target(stages) -> None:
    handler = Gated(forward=False)
    s = stages("evaluate", handler, workers=3, min_workers=1)
    s.start()
    for i in range(3):
        await s.put(item(f"i{i}"))
    await settle(lambda: s.busy == 3)
    s.resize(1)
    handler.open_all.set()  # all three handlers return in the same loop turn
    await settle(lambda: s.stats.ended == 3)
    await spin()
    await s.put(item("late"))
    await spin(50)
    assert s.workers == 1
    assert s.stats.ended == 4, "an item put after the resize must still be served"


async def test_resize_down_during_pause_retires_workers_parked_on_the_pause(stages) -> None:
    handler = Gated(forward=False)
    s = stages("rollout", handler, workers=2, min_workers=1)
    s.start()
    await s.put(item("i0"))
    await s.put(item("i1"))
    await settle(lambda: s.busy == 2)
    stages.running.clear()
    handler.open_all.set()  # both finish while paused and park on running.wait()
    await settle(lambda: s.stats.ended == 2)
    await spin()
    assert s.resize(1) == 1
    stages.running.set()
    await spin(50)
    assert s.workers == 1


async def test_cancelled_idle_worker_does_not_lose_a_woken_item(stages) -> None:
    handler = Gated(forward=False)
    handler.open_all.set()
    s = stages("rollout", handler, workers=2, min_workers=0)
    s.start()
    await spin()
    await s.put(item("x"))  # wakes a getter, which has not run yet
    assert s.resize(0) == 0  # cancel every idle worker, including the woken one
    await spin()
    assert s.workers == 0 and s.depth == 1, "the item stays queued"
    s.resize(1)
    await settle(lambda: s.stats.ended == 1)
    assert handler.calls == ["x"]


async def test_stop_cancels_all_workers(stages) -> None:
    handler = Gated(forward=False)
    s = stages("a", handler, workers=3)
    s.start()
    await s.put(item("x"))
    await settle(lambda: s.busy == 1)
    await s.stop()
    await spin()
    assert s.workers == 0
    assert s.busy == 0


# -- crashes and drops -------------------------------------------------------------------------------


async def test_handler_crash_is_reported_and_the_worker_keeps_serving(stages) -> None:
    hooks = Hooks()
    boom = RuntimeError("handler bug")
    handled: list[str] = []

    async def handler(it: WorkItem) -> None:
        if it.item_id.startswith("bad"):
            raise boom
        handled.append(it.item_id)
        return None

    s = stages("a", handler, hooks=hooks, workers=1)
    s.start()
    for iid in ("bad1", "ok1", "bad2", "ok2"):
        await s.put(item(iid))
    await settle(lambda: len(handled) == 2)
    assert handled == ["ok1", "ok2"]
    assert [(st, iid) for st, iid, _ in hooks.crashed] == [("a", "bad1"), ("a", "bad2")]
    assert all(exc is boom for _, _, exc in hooks.crashed)
    assert s.stats.crashed == 2 and s.stats.ended == 2 and s.stats.taken == 4
    # a crashed item is not reported as finished
    assert [iid for _, iid, _ in hooks.finished] == ["ok1", "ok2"]
    assert s.workers == 1 and s.busy == 0
    await asyncio.wait_for(s.queue.join(), 1)


async def test_drop_reason_skips_the_handler(stages) -> None:
    hooks = Hooks(drop={"stale": "stale: gap 3 > max_gap 2"})
    handler = Gated(forward=True)
    handler.open_all.set()
    downstream = stages("b", Gated(forward=False), capacity=10, workers=1)
    s = stages("a", handler, hooks=hooks)
    s.downstream = downstream
    s.start()
    await s.put(item("stale"))
    await s.put(item("fresh"))
    await settle(lambda: s.stats.forwarded == 1)
    assert handler.calls == ["fresh"]
    assert s.stats.dropped == 1 and s.stats.taken == 2
    assert ("a", "stale", "stale: gap 3 > max_gap 2") in hooks.finished
    assert [it.item_id for it in list(downstream.queue._queue)] == ["fresh"]  # type: ignore[attr-defined]
    await asyncio.wait_for(s.queue.join(), 1)


# -- rate meter --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_rate_meter_counts_over_a_sliding_window() -> None:
    clock = FakeClock(100.0)
    meter = RateMeter(window_s=10.0, clock=clock)
    assert meter.rate() == 0.0
    for t in (100.0, 101.0, 102.0, 105.0):
        clock.t = t
        meter.mark()
    assert meter.total == 4
    assert meter.rate() == pytest.approx(0.4)
    clock.t = 111.0  # 100 is more than 10 s old; 101 is exactly 10 s old and still counts
    assert meter.rate() == pytest.approx(0.3)
    clock.t = 112.5
    assert meter.rate() == pytest.approx(0.1)
    clock.t = 200.0
    assert meter.rate() == 0.0
    assert meter.total == 4, "total is never windowed"


async def test_stage_meter_uses_the_injected_clock(stages) -> None:
    clock = FakeClock(50.0)

    async def passthrough(it: WorkItem) -> WorkItem:
        return it

    sink = stages("b", Gated(forward=False), capacity=10)
    s = stages("a", passthrough, clock=clock)
    s.downstream = sink
    s.start()
    for i in range(3):
        await s.put(item(f"i{i}"))
    await settle(lambda: s.stats.forwarded == 3)
    assert s.meter.clock is clock
    assert s.meter.rate() == pytest.approx(3 / s.meter.window_s)
    clock.t += s.meter.window_s + 1
    assert s.meter.rate() == 0.0
