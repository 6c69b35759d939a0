"""The LLM endpoint an analysis or replay talks to: the run's own (reflection or task) endpoint by
default, or --llm-url/--model, or the simulated backend (--llm sim, or a run made on sim://)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from engine.config import SIM_URL, EndpointConfig, SimConfig
from engine.llm.client import LLMClient
from engine.llm.sim import sim_transport
from engine.trace.errors import TraceError

# Simulated seconds per wall second for analysis calls: nothing here measures time.
SIM_TIME_SCALE = 100000.0


@dataclass
class Choice:
    url: str | None = None
    model: str | None = None
    sim: bool = False
    api_key_env: str | None = None


def endpoint_config(run_config: dict[str, Any], role: str, choice: Choice) -> EndpointConfig:
    """role: reflection_llm (the proposer / judge) or task_llm."""
    stored = run_config.get(role) or run_config.get("task_llm") or {}
    raw = {k: v for k, v in stored.items() if k in EndpointConfig.model_fields}
    if choice.sim:
        raw.update(url=SIM_URL, api_key_env=None)
    if choice.url:
        raw.update(url=choice.url, model=choice.model or raw.get("model") or "default")
    elif choice.model:
        raw["model"] = choice.model
    if choice.api_key_env:
        raw["api_key_env"] = choice.api_key_env
    if "***" in str(raw.get("url", "")):
        raise TraceError("the run's endpoint URL held credentials, which are never stored; pass --llm-url URL")
    if raw.get("api_key_env") and not os.environ.get(raw["api_key_env"]):
        raise TraceError(f"environment variable {raw['api_key_env']} (api_key_env) is not set")
    try:
        return EndpointConfig.model_validate(raw)
    except ValueError as exc:
        raise TraceError(f"bad endpoint: {exc}") from None


def make_client(cfg: EndpointConfig, run_config: dict[str, Any], name: str, behaviours: tuple = ()) -> LLMClient:
    if cfg.url == SIM_URL:
        sim = {k: v for k, v in (run_config.get("sim") or {}).items() if k in SimConfig.model_fields}
        sim["time_scale"] = SIM_TIME_SCALE
        transport, _state = sim_transport(SimConfig.model_validate(sim), behaviours=behaviours)
        return LLMClient(cfg, name=name, transport=transport)  # base: SIM_BASE_URL
    if cfg.url.startswith("local://"):
        raise TraceError("the run used the managed local server; start it (`evotui local serve`) and pass --llm-url")
    return LLMClient(cfg, name=name)


def secret_vars(run_config: dict[str, Any]) -> frozenset[str]:
    """The run's key variables, which its evaluations never see (the sandbox drops them), as the
    program stages do: the api_key_env of the task and reflection endpoints."""
    names = set()
    for role in ("task_llm", "reflection_llm", "reflection"):
        ep = run_config.get(role)
        if isinstance(ep, dict) and ep.get("api_key_env"):
            names.add(str(ep["api_key_env"]))
    return frozenset(names)
