"""Simulated OpenAI-compatible backend (results obtained with it are simulated).

It knows no task; tasks teach it their request layouts through plug-ins (plugins.py).
"""

from engine.llm.sim.app import SimApp, SimBackendState, create_sim_app, sim_transport
from engine.llm.sim.plugins import SimBehaviour, SimRequest

__all__ = ["SimApp", "SimBackendState", "SimBehaviour", "SimRequest", "create_sim_app", "sim_transport"]
