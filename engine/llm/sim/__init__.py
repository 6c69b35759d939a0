"""Simulated OpenAI-compatible backend (results obtained with it are simulated)."""

from engine.llm.sim.app import SimApp, SimBackendState, create_sim_app, sim_transport

__all__ = ["SimApp", "SimBackendState", "create_sim_app", "sim_transport"]
