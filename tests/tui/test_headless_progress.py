"""--no-ui progress: N/budget and an ETA on the compact line, a rate that leaves out paused time
and says so on the wide one; pauses counted from the run's state changes; a real run's lines."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from engine.events import EventBus, ProposalStart, StateChanged
from evotui.headless import progress_line
from evotui.headless.progress import PauseClock, duration, progress_of
from tests.tui.fakes import frozen_snapshot

ROOT = Path(__file__).resolve().parents[2]


def snap(**changes):
    return replace(frozen_snapshot(), **changes)


def test_pause_clock_sums_closed_and_open_pauses_from_event_times() -> None:
    bus = EventBus()
    now = [0.0]
    clock = PauseClock(bus.subscribe(), now=lambda: now[0])
    for t, state in [(10.0, "paused"), (40.0, "running"), (50.0, "paused")]:
        bus.publish(StateChanged(state=state, t=t))
    bus.publish(ProposalStart(item_id="i1", parent_id="a0", t=51.0))  # not a state change: ignored
    now[0] = 55.0
    assert clock.paused_s() == 35.0  # 30 s closed + 5 s still open
    bus.publish(StateChanged(state="draining", t=58.0))
    now[0] = 100.0
    assert clock.paused_s() == 38.0  # closed at the drain, the clock no longer runs


def test_rate_and_eta_leave_out_paused_time_and_a_resumed_runs_earlier_work() -> None:
    # 2 minutes elapsed, 1 of them paused; 20 proposals this session (2 before the resume).
    s = snap(elapsed_s=120.0, budget_spent=MappingProxyType({"proposals": 22.0, "wall_s": 120.0}),
             budget_limits=MappingProxyType({"proposals": 40.0, "wall_s": None}))
    p = progress_of(s, {"proposals": 2.0}, paused_s=60.0)
    assert (p.done, p.limit, p.per_min) == (22.0, 40.0, 20.0)
    assert p.eta_s == 54.0 and p.eta_key == "proposals"  # 18 left at 20 a minute
    line = progress_line(s, width=80, progress=p)
    assert "prop 22/40 eta 54s" in line
    wide = progress_line(s, width=200, progress=p)
    assert wide.endswith("| 20.0 prop/wall-min running, 1m00s paused left out")


def test_the_nearest_limit_sets_the_eta_and_the_wide_line_names_it() -> None:
    s = snap(elapsed_s=600.0, budget_spent=MappingProxyType({"proposals": 10.0, "usd": 0.5, "wall_s": 600.0}),
             budget_limits=MappingProxyType({"proposals": 100.0, "usd": 1.0, "wall_s": 3600.0}))
    p = progress_of(s, {}, paused_s=0.0)
    assert p.eta_key == "usd" and p.eta_s == 600.0  # $0.50 more at $0.05 a minute, before 90 proposals
    wide = progress_line(s, width=200, progress=p)
    assert "prop 10/100 eta 10m00s" in wide and "(eta until the usd limit)" in wide
    clock_only = progress_of(replace(s, budget_limits=MappingProxyType({"wall_s": 3600.0})), {}, 0.0)
    assert clock_only.eta_s == 3000.0 and clock_only.eta_key == "wall_s"


def test_no_limit_no_eta_and_no_rate_before_the_first_proposal() -> None:
    s = snap(elapsed_s=5.0, budget_spent=MappingProxyType({"proposals": 0.0}),
             budget_limits=MappingProxyType({"proposals": None, "wall_s": None}))
    p = progress_of(s, {}, 0.0)
    assert p.eta_s is None and p.limit is None and p.per_min == 0.0
    assert " prop 0 acc " in progress_line(s, width=80, progress=p)


def test_the_compact_line_with_a_budget_still_fits_80_columns() -> None:
    big = snap(elapsed_s=99999.4, state="draining", pool_version=9999, accepted=9999, rejected=9999, failed=999,
               merges_accepted=99, best_score=0.98765,
               budget_spent=MappingProxyType({"proposals": 9999.0, "wall_s": 99999.4}),
               budget_limits=MappingProxyType({"proposals": 10000.0, "wall_s": None}))
    p = progress_of(big, {}, paused_s=3600.0)
    line = progress_line(big, width=80, progress=p, gpu=" gpu 3/4 (0:2 1:1)")
    assert len(line) <= 80, (len(line), line)
    assert "prop 9999/10000 eta " in line and "acc 9999" in line and "gpu 3/4" in line


def test_durations_stay_short() -> None:
    assert [duration(s) for s in (0.4, 59, 725, 11_220, 187_200)] == ["0s", "59s", "12m05s", "3h07m", "2d04h"]


def test_a_real_headless_run_prints_n_of_budget_eta_and_the_running_rate(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(tmp_path / "r.db"),
                           "--max-proposals", "12", "--time-scale", "400", "--progress-every", "0.2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert progress, proc.stderr[-2000:]
    last = progress[-1]  # the final state: every proposal the budget allowed was made
    assert " prop 12/12 eta 0s " in last and "prop/wall-min running" in last, last
