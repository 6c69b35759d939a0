"""The virtual simulated clock (engine/llm/sim/virtual_clock.py), driven look by look with a
scripted view of the clients: no event loop, no wall time, no /proc."""

from __future__ import annotations

from engine.llm.sim.client_watch import Sample
from engine.llm.sim.virtual_clock import SETTLE, VirtualClock

IDLE, WORK = Sample(busy=False, cpu_s=0.0), Sample(busy=True, cpu_s=0.010)


def _clock(looks: list[Sample], scale: float = 100.0) -> VirtualClock:
    it = iter(looks)
    return VirtualClock(scale, lambda: next(it))


def test_working_clients_move_time_by_their_cpu_time_only():
    clock = _clock([WORK] * 5)
    fired = []
    clock.call_at(0.035, lambda: fired.append(clock.now()))
    run = 0
    for _ in range(5):
        run = clock.look(lambda: False, run, wall_dt=1.0)  # a second of wall per look: not counted
    assert abs(clock.now() - 0.050) < 1e-9
    assert fired == [0.035]  # a timer passed by the clients' work fires at its own instant
    assert clock.jumps == 0


def test_waiting_clients_jump_to_the_next_event_after_settling():
    clock = _clock([IDLE] * (SETTLE + 1))
    fired = []
    clock.call_at(30.0, lambda: fired.append(clock.now()))
    clock.call_at(45.0, lambda: fired.append(clock.now()))
    run = 0
    for _ in range(SETTLE - 1):
        run = clock.look(lambda: False, run, wall_dt=0.004)
        assert clock.now() == 0.0 and not fired  # not yet sure everyone waits
    # settled: nothing hands the server work, so it jumps over both events in one look
    run = clock.look(lambda: False, run, wall_dt=0.004)
    assert fired == [30.0, 45.0] and clock.now() == 45.0 and clock.jumps == 2 and run == 0


def test_a_jump_stops_at_the_event_that_gives_the_server_a_reply_to_send():
    clock = _clock([IDLE] * SETTLE)
    reply_due = []
    clock.call_at(10.0, lambda: reply_due.append(True))
    clock.call_at(20.0, lambda: reply_due.append(True))
    run = 0
    for _ in range(SETTLE):
        run = clock.look(lambda: bool(reply_due), run, wall_dt=0.004)
    assert clock.now() == 10.0 and clock.jumps == 1  # the 20 s event waits for the clients' next move


def test_server_work_in_hand_counts_as_activity():
    clock = _clock([IDLE] * 4)
    clock.call_at(5.0, lambda: None)
    run = 0
    for _ in range(4):
        run = clock.look(lambda: True, run, wall_dt=0.004)  # a request read but not yet queued
    assert clock.now() == 0.0 and clock.jumps == 0


def test_idle_clients_with_nothing_in_flight_wait_at_wall_time_times_scale():
    clock = _clock([IDLE] * 3, scale=50.0)
    run = 0
    for _ in range(3):
        run = clock.look(lambda: False, run, wall_dt=0.01)
    assert abs(clock.now() - 1.5) < 1e-9 and abs(clock.waited_s - 1.5) < 1e-9


def test_cancelled_timers_neither_fire_nor_stop_a_jump():
    clock = _clock([IDLE] * SETTLE)
    fired = []
    clock.call_at(3.0, lambda: fired.append("cancelled")).cancel()
    clock.call_at(8.0, lambda: fired.append("kept"))
    run = 0
    for _ in range(SETTLE):
        run = clock.look(lambda: False, run, wall_dt=0.004)
    assert fired == ["kept"] and clock.now() == 8.0


def test_a_thread_of_many_short_turns_is_a_poller_and_one_at_work_is_not():
    import os

    from engine.llm.sim.client_watch import POLL_WINDOW_S, ClientWatch

    watch = ClientWatch(os.getpid())
    window = int(POLL_WINDOW_S * 1e9)
    # (tid, CPU ns, turns on a CPU) at the window's start and end
    watch._classify(1, 0, 0, 0)
    watch._classify(1, 8 * 50_000, 8, window)  # 8 wakes of 50 us: a queue poller
    watch._classify(2, 0, 0, 0)
    watch._classify(2, 90_000_000, 30, window)  # 30 turns of 3 ms: at work on a loaded machine
    watch._classify(3, 0, 0, 0)
    watch._classify(3, 20_000, 2, window)  # two short turns: woken by replies, not polling
    assert watch._pollers == {1}
    watch._classify(1, 8 * 50_000 + 40_000_000, 10, 2 * window)  # the poller starts real work
    assert watch._pollers == set()


def test_cpu_of_a_client_that_is_asleep_at_the_look_counts_and_does_not_stop_a_jump():
    """A poller ran a little since the last look and sleeps now: its CPU time counts, then the
    clock jumps (a CPU-time test alone held OpenEvolve's controller at its CPU rate)."""
    clock = _clock([Sample(busy=False, cpu_s=0.002)])
    fired = []
    clock.call_at(12.0, lambda: fired.append(clock.now()))
    clock.look(lambda: False, 0, wall_dt=0.004)
    assert fired == [12.0] and clock.client_cpu_s == 0.002 and clock.jumps == 1
