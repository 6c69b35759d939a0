"""The event bus: fan-out, bounded mailboxes that drop the oldest, wait/close, to_dict."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine import events as ev
from engine.events import EventBus, Subscription


def state(name: str) -> ev.StateChanged:
    return ev.StateChanged(state=name)


async def spin(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    a, b = bus.subscribe(), bus.subscribe()
    events = [state("running"), state("paused"), state("running")]
    for e in events:
        bus.publish(e)
    assert bus.published == 3
    assert a.drain() == events
    assert b.drain() == events
    assert a.drain() == [] and a.dropped == 0


async def test_late_subscriber_sees_only_later_events() -> None:
    bus = EventBus()
    bus.publish(state("early"))
    sub = bus.subscribe()
    bus.publish(state("late"))
    assert [e.state for e in sub.drain()] == ["late"]


async def test_full_subscription_drops_oldest_and_counts() -> None:
    bus = EventBus()
    slow = bus.subscribe(maxlen=2)
    fast = bus.subscribe(maxlen=100)
    for i in range(5):
        bus.publish(state(f"s{i}"))
    assert [e.state for e in slow.drain()] == ["s3", "s4"]
    assert slow.dropped == 3
    assert len(fast.drain()) == 5 and fast.dropped == 0
    # after draining there is room again
    bus.publish(state("s5"))
    assert [e.state for e in slow.drain()] == ["s5"]
    assert slow.dropped == 3


async def test_unsubscribe_stops_delivery() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    bus.unsubscribe(sub)
    bus.unsubscribe(sub)  # idempotent
    bus.publish(state("x"))
    assert sub.drain() == []
    assert bus.published == 1


async def test_wait_blocks_until_an_event_arrives() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    waiter = asyncio.create_task(sub.wait())
    await spin()
    assert not waiter.done()
    e1, e2 = state("a"), state("b")
    bus.publish(e1)
    bus.publish(e2)
    assert await asyncio.wait_for(waiter, 1) == [e1, e2]
    assert sub.drain() == []


async def test_wait_returns_buffered_events_immediately() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    e = state("a")
    bus.publish(e)
    assert await asyncio.wait_for(sub.wait(), 1) == [e]
    # the ready flag was cleared: the next wait blocks again
    waiter = asyncio.create_task(sub.wait())
    await spin()
    assert not waiter.done()
    bus.close()
    assert await asyncio.wait_for(waiter, 1) == []


async def test_wait_returns_on_close() -> None:
    bus = EventBus()
    subs = [bus.subscribe(), bus.subscribe()]
    waiters = [asyncio.create_task(s.wait()) for s in subs]
    await spin()
    assert not any(w.done() for w in waiters)
    bus.close()
    results = await asyncio.wait_for(asyncio.gather(*waiters), 1)
    assert results == [[], []]
    assert all(s.closed for s in subs)
    # a closed subscription never blocks again
    assert await asyncio.wait_for(subs[0].wait(), 1) == []


async def test_events_buffered_before_close_are_still_delivered() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    e = state("last")
    bus.publish(e)
    bus.close()
    assert await asyncio.wait_for(sub.wait(), 1) == [e]


def test_to_dict_carries_the_event_name_and_fields() -> None:
    e = ev.CandidateAccepted(
        item_id="i1", artifact_id="a2", parent_id="a1", val_mean=0.5, pool_version=3, best=True, t=12.5
    )
    d = e.to_dict()
    assert d == {
        "event": "candidate_accepted",
        "t": 12.5,
        "item_id": "i1",
        "artifact_id": "a2",
        "parent_id": "a1",
        "val_mean": 0.5,
        "pool_version": 3,
        "best": True,
    }
    json.dumps(d)


def _all_event_types() -> list[type[ev.Event]]:
    return [cls for cls in vars(ev).values() if isinstance(cls, type) and issubclass(cls, ev.Event) and cls is not ev.Event]


def test_every_event_kind_is_unique_and_serialisable() -> None:
    types = _all_event_types()
    assert len(types) >= 15
    kinds = [cls.kind for cls in types]
    assert len(set(kinds)) == len(kinds)
    assert "event" not in kinds
    sample = ev.QueueDepth(depths={"rollout": 2})
    assert sample.to_dict()["event"] == "queue_depth"
    assert sample.to_dict()["depths"] == {"rollout": 2}
    assert isinstance(sample.t, float)


def test_events_are_frozen_and_keyword_only() -> None:
    e = ev.RunFinished(run_id="r", status="completed", reason="done")
    with pytest.raises(AttributeError):
        e.status = "failed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ev.RunFinished("r", "completed", "done")  # type: ignore[misc]


def test_subscription_with_zero_room_counts_everything_as_dropped() -> None:
    sub = Subscription(0)
    sub._push(state("x"))
    assert sub.dropped == 1 and sub.drain() == []
