"""Operator steering of a live run (issue 38): guidance shown to the proposer, pinned and banned
parents, re-evaluation requests; every act a row of the steering table (schema v7).

acts.py   the act (a row), its checks of plain values
state.py  SteeringState: the replay of a run's acts, and the checks against it and the pool
live.py   on a running run: take an act (row, state, bus event), load the acts on resume, the
          guidance section the proposer prompt builders append, the parent filter for pin/ban
"""

from engine.steering.acts import Act, SteerError
from engine.steering.state import SteeringState

__all__ = ["Act", "SteerError", "SteeringState"]
