"""The simulator plug-ins of the built-in tasks (see engine/llm/sim/plugins.py).

The engine and ``evotui sim-server`` hand all of them to the simulated backend: plug-ins
recognise their requests by content, so a backend that knows every built-in task answers any
run (and any copy of a task folder) the way it always did, whichever task is running. A task
that gains a simulated model adds its plug-in here.
"""

from __future__ import annotations

from engine.llm.sim.plugins import SimBehaviour
from engine.tasks.agentworld_sim import AgentWorldBehaviour
from engine.tasks.agentworld_textgrad_sim import AgentTextGradBehaviour
from engine.tasks.overrideworld_sim import OverrideWorldBehaviour
from engine.tasks.ruleworld_sim import RuleWorldBehaviour


def all_behaviours() -> tuple[SimBehaviour, ...]:
    """Every built-in task's plug-in, in the order the simulator asks them (the agent-tools
    and overrides reflectors first: the rules reflector answers any fenced block with feedback)."""
    return (AgentWorldBehaviour(), AgentTextGradBehaviour(), OverrideWorldBehaviour(), RuleWorldBehaviour())
