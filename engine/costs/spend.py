"""What a run's LLM calls cost: dollars (engine/pricing) and, for endpoints that declare GPUs,
GPU-seconds (the call's wall time x the endpoint's GPUs: the GPU time the call held; a server that
batches concurrent calls is charged once per call, an upper bound).

The meter prices every call as it is recorded and tallies spend per stage, model and endpoint. A
resumed run starts from its stored calls (grouped in the store's counts), so the spend after any
number of kills equals the price of the calls the database records. It also bounds one call's
cost for the budget's worst-case reservations.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable
from urllib.parse import urlsplit

from engine.pricing import Price, PriceTable

if TYPE_CHECKING:
    from engine.config import EndpointConfig, RunConfig

PROMPT_PRIOR = 4096
"""Prompt tokens one call is assumed to take before any call was seen (worst-case reservations)."""
PROMPT_HEADROOM = 1.5
"""Later reservations: the largest prompt seen times this (prompts grow with the parent's text)."""
LATENCY_PRIOR_S = 120.0
"""GPU reservations: a call's wall time before any was seen, and its floor."""


def _url_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or ''}:{parts.port or ''}{parts.path.rstrip('/')}".lower()


@dataclass(frozen=True)
class EndpointInfo:
    gpus: float
    max_tokens: int
    model: str


class SpendMeter:
    def __init__(self, table: PriceTable, stages: dict[str, EndpointInfo], routes: dict[str, EndpointInfo]) -> None:
        self.table = table
        self.stages = stages
        """Endpoint name (task, reflection) -> what its config declares."""
        self.routes = routes
        """URL key of an endpoint of a list -> what it declares (its own gpus, else the stage's)."""
        self.usd = 0.0
        self.gpu_s = 0.0
        self.by: dict[str, dict[str, dict[str, float]]] = {k: defaultdict(lambda: {"usd": 0.0, "gpu_s": 0.0, "calls": 0})
                                                             for k in ("stage", "model", "endpoint")}
        self.unpriced: list[str] = []
        self.warnings: list[str] = []
        self.largest_prompt = 0
        self.longest_call_s = 0.0

    @classmethod
    def for_config(cls, config: RunConfig) -> SpendMeter:
        table = PriceTable.load(config.budget.prices_file)
        stages: dict[str, EndpointInfo] = {}
        routes: dict[str, EndpointInfo] = {}

        def add(name: str, ep: EndpointConfig) -> None:
            stages[name] = EndpointInfo(ep.gpus, ep.max_tokens, ep.model)
            for r in ep.endpoints:
                routes[_url_key(r.url)] = EndpointInfo(ep.gpus if r.gpus is None else r.gpus, ep.max_tokens,
                                                       r.model or ep.model)

        add("task", config.task_llm)
        add("reflection", config.reflection)
        return cls(table, stages, routes)

    def _endpoint(self, endpoint: str, url: str | None) -> EndpointInfo | None:
        return self.routes.get(_url_key(url or "")) or self.stages.get(endpoint)

    def _price(self, model: str) -> Price | None:
        price = self.table.lookup(model)
        if price is None and model not in self.unpriced:
            self.unpriced.append(model)
            self.warnings.append(f"model {model!r} has no price in the price table: its calls count as $0 "
                                 f"(add it to a file passed with --prices)")
        return price

    def cost(self, endpoint: str, url: str | None, model: str, prompt: int, completion: int,
             latency_s: float, cached: int = 0) -> tuple[float, float]:
        """(dollars, GPU-seconds) of one call. An endpoint with GPUs is paid in GPU time, not dollars."""
        info = self._endpoint(endpoint, url)
        if info is not None and info.gpus > 0:
            return 0.0, max(0.0, latency_s) * info.gpus
        price = self._price(model)
        return (price.usd(prompt, completion, cached) if price else 0.0), 0.0

    def record(self, endpoint: str, url: str | None, model: str, stage: str, prompt: int, completion: int,
               latency_s: float, calls: int = 1, cached: int = 0) -> tuple[float, float]:
        """Price one call (or a stored group of calls) and add it to the tallies; `cached` of the
        prompt tokens were served from the server's prompt cache (the model's cached price)."""
        usd, gpu_s = self.cost(endpoint, url, model, prompt, completion, latency_s, cached)
        self.usd += usd
        self.gpu_s += gpu_s
        for kind, key in (("stage", stage or "-"), ("model", model or "-"), ("endpoint", endpoint or "-")):
            row = self.by[kind][key]
            row["usd"] += usd
            row["gpu_s"] += gpu_s
            row["calls"] += calls
        if calls == 1:
            self.largest_prompt = max(self.largest_prompt, prompt)
            self.longest_call_s = max(self.longest_call_s, latency_s)
        else:  # a stored group: its mean is what is known per call
            self.largest_prompt = max(self.largest_prompt, prompt // max(1, calls))
            self.longest_call_s = max(self.longest_call_s, latency_s / max(1, calls))
        return usd, gpu_s

    def restore(self, groups: Iterable[list]) -> None:
        """Stored calls, grouped [endpoint, url, model, stage, calls, prompt, completion, latency_s,
        cached] (cached prompt tokens since schema v8; a group without it has none)."""
        for endpoint, url, model, stage, calls, prompt, completion, latency, *rest in groups:
            cached = int(rest[0] or 0) if rest else 0
            self.record(str(endpoint), url, str(model or ""), str(stage or ""), int(prompt or 0),
                        int(completion or 0), float(latency or 0.0), calls=int(calls), cached=cached)

    def worst_call(self) -> tuple[float, float]:
        """(dollars, GPU-seconds) one call of any of the run's endpoints can cost at most: the
        endpoint's max_tokens of output, a prompt with headroom over the largest seen."""
        prompt = int(max(PROMPT_PRIOR, self.largest_prompt * PROMPT_HEADROOM))
        seconds = max(LATENCY_PRIOR_S, self.longest_call_s * PROMPT_HEADROOM)
        usd = gpu_s = 0.0
        for info in [*self.stages.values(), *self.routes.values()]:
            if info.gpus > 0:
                gpu_s = max(gpu_s, seconds * info.gpus)
            else:
                price = self.table.lookup(info.model)
                if price is not None:
                    usd = max(usd, price.usd(prompt, info.max_tokens))
        return usd, gpu_s

    def figures(self) -> dict:
        def rows(kind: str) -> dict:
            return {k: {"calls": int(v["calls"]), "usd": round(v["usd"], 6), "gpu_s": round(v["gpu_s"], 3)}
                    for k, v in sorted(self.by[kind].items())}

        return {"usd": round(self.usd, 6), "gpu_hours": round(self.gpu_s / 3600.0, 6),
                "by_stage": rows("stage"), "by_model": rows("model"), "by_endpoint": rows("endpoint"),
                "unpriced_models": list(self.unpriced)}


def stored_spend(config: dict, counts: dict) -> dict | None:
    """A stored run's spend, priced from its recorded calls (`evotui show`, live runs included);
    None when its stored config no longer validates (a run of an older release)."""
    from engine.config import RunConfig
    from engine.pricing import PriceError

    try:
        meter = SpendMeter.for_config(RunConfig.model_validate(config))
    except (ValueError, PriceError):
        return None
    meter.restore(counts.get("call_groups") or [])
    return meter.figures()


def spend_text(fig: dict) -> str:
    """One line: totals, then dollars per stage and per model."""
    def part(kind: str) -> str:
        return ", ".join(f"{k} ${v['usd']:.4f}" + (f" {v['gpu_s'] / 3600:.4f} GPU-h" if v["gpu_s"] else "")
                         for k, v in fig[kind].items())
    unpriced = f"; no price for {', '.join(fig['unpriced_models'])} ($0)" if fig["unpriced_models"] else ""
    return (f"${fig['usd']:.4f}, {fig['gpu_hours']:.4f} GPU-h; by stage: {part('by_stage') or '-'}; "
            f"by model: {part('by_model') or '-'}{unpriced}")
