"""Configuration of the run's services: where evaluations run ([evaluator]) and the endpoint
lists of LLM stages ([task_llm] endpoints). Re-exported by engine.config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["EvaluatorConfig", "RouteConfig"]


class StrictModel(BaseModel):
    """The base of every config model: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class RouteConfig(StrictModel):
    """One of several endpoints serving a stage ([task_llm] endpoints = [...]): it inherits the
    stage's settings (model, timeouts, retries, ...) and overrides what it names."""

    url: str
    """Base URL including /v1 (http:// or https://)."""
    model: str | None = None
    """Model served there; None = the stage's model."""
    api_key_env: str | None = None
    """None = the stage's api_key_env."""
    weight: float = Field(default=1.0, gt=0)
    """Share of the traffic when endpoints are equally loaded (load is in-flight / weight)."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """Requests at once to this endpoint; None = the stage's max_concurrency."""
    gpus: float | None = Field(default=None, ge=0)
    """GPUs of the server behind this endpoint (its calls cost GPU-seconds); None = the stage's gpus."""

    @field_validator("url")
    @classmethod
    def _http_only(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("an endpoint in a list must start with http:// or https://")
        return v.rstrip("/")


class EvaluatorConfig(StrictModel):
    """Where program evaluations run ([evaluator]; README "Evaluating on a Ray cluster")."""

    backend: Literal["local", "ray"] = "local"
    """local: sandbox subprocesses on this machine; ray: the same sandbox inside Ray tasks."""
    address: str | None = None
    """ray: "auto" (the cluster this machine belongs to), "HOST:PORT" or "ray://HOST:PORT";
    None = a local Ray instance started for the run and stopped at its end."""
    num_cpus: float = Field(default=1.0, ge=0)
    """CPUs each evaluation reserves on the cluster."""
    num_gpus: float = Field(default=0.0, ge=0)
    """GPUs each evaluation reserves (fractions share a GPU)."""
    memory_mb: int | None = Field(default=None, gt=0)
    """Memory each evaluation reserves for Ray's scheduler (the sandbox's own limit is eval_memory_mb)."""
    max_retries: int = Field(default=2, ge=0)
    """Times an evaluation whose worker or node died is run again elsewhere before it fails."""
    max_in_flight: int | None = Field(default=None, gt=0)
    """Most evaluations submitted at once; None = as many as the cluster's resources fit."""
    local_num_cpus: int | None = Field(default=None, gt=0)
    """CPUs of the local Ray instance (address unset); None = Ray's default (all)."""
    scratch_root: str | None = None
    """Where workers unpack the task folder and make scratch directories; None = the worker's
    temporary directory."""
    lost_after_s: float = Field(default=15.0, gt=0)
    """A cluster that does not answer a health probe within this time is lost: the run stops,
    resumable."""
    auth_token_file: str | None = None
    """A file holding the cluster's token (Ray token authentication): the driver connects in token
    mode with it. None = Ray's own sources (RAY_AUTH_MODE=token with RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token). Only with address: the run's own instance makes a
    token of its own."""

    gpus: Literal["auto"] | list[str | int] | None = None
    """local: GPU slots (README "GPU slots"): "auto" (NVIDIA_VISIBLE_DEVICES, else nvidia-smi), a list
    of device ids/UUIDs, or None (evaluations see the machine's devices unchanged). Each evaluation
    sees only its slot's device, with compile caches of its own."""
    evals_per_gpu: int = Field(default=1, gt=0)
    """local: evaluations that share one GPU at once (slots = GPUs x this)."""
    gpu_memory_fraction: float | None = Field(default=None, gt=0, le=1)
    """local: share of a GPU's memory each evaluation may take where the framework honours one
    (JAX; EVOTUI_GPU_MEMORY_FRACTION for the evaluator's own use); None = 0.9 / evals_per_gpu when
    evaluations share a GPU, else the framework's default."""
    gpu_vendor: Literal["cuda", "rocm"] = "cuda"
    """cuda: CUDA_VISIBLE_DEVICES selects the slot's device; rocm: ROCR_VISIBLE_DEVICES does."""

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v):
        if v is None or v == "auto":
            return v
        ids = [str(d).strip() for d in v]
        if not ids or any(not d for d in ids):
            raise ValueError('must be "auto", a non-empty list of device ids, or unset')
        if len(set(ids)) != len(ids):
            raise ValueError(f"lists a device twice: {ids}")
        return ids

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is None or v == "auto":
            return v
        rest = v.removeprefix("ray://")
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError('must be "auto", "HOST:PORT" or "ray://HOST:PORT"')
        return v

    @model_validator(mode="after")
    def _gpus_are_local(self) -> EvaluatorConfig:
        if self.gpus is not None and self.backend == "ray":
            raise ValueError("gpus are slots of local evaluations; with backend = \"ray\" set num_gpus instead")
        return self

    @model_validator(mode="after")
    def _token_needs_a_cluster(self) -> EvaluatorConfig:
        if self.auth_token_file and self.address is None:
            raise ValueError("auth_token_file is the token of a cluster: set address too (the run's own "
                             "Ray instance makes a token of its own)")
        return self
