"""What a run will cost before it spends: a short probe run, extrapolated to the run's budget.

The probe is the same task, mode, strategy and endpoints as the run asked for, with every budget
replaced by a few proposals, in a scratch database that is removed afterwards. From its recorded
calls (priced by engine/costs/spend.py) come the seed evaluation's cost and the mean cost of one
proposal; the run's own limits then say how many proposals the budget buys and what it will spend.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from engine.config import SIM_URL, BudgetConfig, ConfigError, LengthDist, RunConfig, deep_merge
from engine.llm.sim.serving import FALLBACK_LENGTH
from engine.pipeline.modes import mode_named
from engine.costs.spend import SpendMeter

MIN_USEFUL_PROPOSALS = 10
"""Fewer proposals than this rarely improve on the seed: the estimate warns."""
PROBE_PROPOSALS = 8
"""Enough proposals that one lucky early acceptance does not set the rate (rules, 25 proposals on the
simulated backend: 5-proposal probes landed 6-39% over the run's spend, 8-proposal ones 10-11%)."""

_NO_LIMITS = {"max_proposals": None, "max_llm_calls": None, "max_tokens": None, "max_metric_calls": None,
              "max_usd": None, "max_gpu_hours": None, "max_wall_s": None, "max_wall_grace_s": None}
# What one proposal and the seed cost, per budget key (gpu_s is limited in hours).
_KEYS = ("usd", "gpu_s", "llm_calls", "tokens", "metric_calls")


class EstimateError(Exception):
    """The probe could not run or measured nothing; the message says why."""


@dataclass
class Estimate:
    task: str
    mode: str
    strategy: str
    backend: str
    simulated: bool
    probe_proposals: int
    seed: dict[str, float]
    per_proposal: dict[str, float]
    limits: dict[str, float | None]
    proposals: int | None
    """Proposals the budget buys (None: no limit bounds them)."""
    limited_by: str | None
    expected: dict[str, float]
    """Spend of the whole run: the seed plus `proposals` proposals."""
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        seed, per, exp = self.seed, self.per_proposal, self.expected
        money = lambda d: f"${d['usd']:.4f}" + (f" + {d['gpu_s'] / 3600:.4f} GPU-h" if d.get("gpu_s") else "")
        out = [f"estimate: {self.task}, mode {self.mode}, strategy {self.strategy}, {self.backend} "
               f"(probe of {self.probe_proposals} proposals)",
               f"  seed evaluation: {money(seed)}, {seed['llm_calls']:.0f} LLM calls, {seed['metric_calls']:.0f} metric calls",
               f"  per proposal: {money(per)}, {per['llm_calls']:.1f} LLM calls, {per['tokens']:.0f} tokens, "
               f"{per['metric_calls']:.1f} metric calls"]
        if self.proposals is None:
            out.append("  budget: no limit bounds the proposals (set --max-usd, --max-proposals, ...)")
        else:
            out.append(f"  budget buys about {self.proposals} proposals (limited by {self.limited_by}); "
                       f"expected spend {money(exp)}")
        out += [f"  warning: {w}" for w in self.warnings]
        return out


def run_limits(task_defaults: dict, layers: list[tuple[str, dict]]) -> BudgetConfig:
    """The budget the run itself would have: the task's defaults under the given layers."""
    merged = dict(task_defaults.get("budget") or {})
    for _, layer in layers:
        merged = deep_merge(merged, layer.get("budget") or {})
    try:
        return BudgetConfig.model_validate(merged)
    except ValueError as exc:
        raise ConfigError(f"budget: {exc}") from None


def expected_length(d: LengthDist, cap: int) -> float:
    """Mean of min(lognormal(median, sigma), cap): the simulated backend's completion lengths."""
    top = min(d.max, cap)
    if d.sigma == 0:
        return float(min(d.median, top))
    z = (math.log(top / d.median)) / d.sigma
    phi = lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
    return d.median * math.exp(d.sigma ** 2 / 2) * phi(z - d.sigma) + top * (1.0 - phi(z))


def _completion_model(config: RunConfig) -> Callable[[str, str], float | None]:
    """stage, endpoint -> expected completion tokens when the calibrated length model knows them
    (the simulated backend's [sim] lengths); None: the probe's mean stands."""
    if not config.uses_sim:
        return lambda stage, endpoint: None
    lengths = config.sim.lengths

    def model(stage: str, endpoint: str) -> float | None:
        ep = config.task_llm if endpoint == "task" else config.reflection
        if ep.url != SIM_URL:
            return None
        d = lengths.get(stage) or lengths.get("default") or FALLBACK_LENGTH
        return expected_length(d, ep.max_tokens)

    return model


def _measure(db: Path, run_id: str, meter: SpendMeter, config: RunConfig,
             proposals: int) -> tuple[dict[str, float], dict[str, float]]:
    """(the seed's cost, one proposal's expected cost) from the probe's recorded calls.
    The seed is what it cost. A proposal: per stage and endpoint, the probe's calls per proposal
    at the largest prompt seen (prompts grow with the run's history, then level off) and the
    calibrated mean completion (else the probe's mean)."""
    seed = {k: 0.0 for k in _KEYS}
    per = {k: 0.0 for k in _KEYS}
    completion_of = _completion_model(config)
    con = sqlite3.connect(db)
    try:
        seed_rows = con.execute(
            "SELECT endpoint, url, model, prompt_tokens, completion_tokens, latency_s FROM llm_calls "
            "WHERE run_id = ? AND item_id IS NULL", (run_id,)).fetchall()
        groups = con.execute(
            "SELECT endpoint, url, model, stage, count(*), max(prompt_tokens), avg(completion_tokens), "
            "avg(latency_s) FROM llm_calls WHERE run_id = ? AND item_id IS NOT NULL "
            "GROUP BY endpoint, url, model, stage", (run_id,)).fetchall()
    finally:
        con.close()
    for endpoint, url, model, prompt, completion, latency in seed_rows:
        usd, gpu_s = meter.cost(endpoint, url, model or "", prompt, completion, latency or 0.0)
        seed["usd"] += usd
        seed["gpu_s"] += gpu_s
        seed["llm_calls"] += 1
        seed["tokens"] += prompt + completion
    for endpoint, url, model, stage, n, prompt, completion, latency in groups:
        modelled = completion_of(stage or "", endpoint)
        completion = modelled if modelled is not None else float(completion or 0.0)
        share = n / proposals
        usd, gpu_s = meter.cost(endpoint, url, model or "", int(prompt or 0), int(round(completion)),
                                float(latency or 0.0))
        per["usd"] += share * usd
        per["gpu_s"] += share * gpu_s
        per["llm_calls"] += share
        per["tokens"] += share * (int(prompt or 0) + completion)
    return seed, per


async def probe(open_run: Callable[[list[tuple[str, dict]], Path], Awaitable], layers: list[tuple[str, dict]],
                db_dir: Path, proposals: int | None = None) -> Estimate:
    """Run `proposals` proposals through open_run(layers, db) (an EngineRun factory) in a scratch
    database under db_dir and extrapolate to the limits `layers` ask for. None: PROBE_PROPOSALS,
    or two steps per chain in mode chain, whose first steps all start with a rollout and whose
    later ones are handed on without one (rules, 25 proposals, 8 chains: an 8-proposal probe was
    32% over the run's spend, a 16-proposal one 8%)."""
    scratch = Path(tempfile.mkdtemp(prefix=".evotui-estimate-", dir=db_dir))

    async def opened(n: int, db: Path):
        return await open_run([*layers, ("estimate probe", {"budget": {**_NO_LIMITS, "max_proposals": n}})], db)

    try:
        db = scratch / "probe.db"
        run = await opened(proposals or PROBE_PROPOSALS, db)
        pipeline = run.ctx.config.pipeline
        if proposals is None and mode_named(pipeline.mode).chains and 2 * pipeline.chains > PROBE_PROPOSALS:
            await run.close()
            db = scratch / "probe-chains.db"
            run = await opened(2 * pipeline.chains, db)
        result = await run.run()
        if result.status != "completed":
            raise EstimateError(f"the probe run ended {result.status}: {result.reason}")
        ctx = run.ctx
        summary = result.summary
        made = int(summary.get("proposal_attempts") or 0)
        if made == 0:
            raise EstimateError("the probe made no proposal (every attempt was skipped): nothing to extrapolate")
        meter = SpendMeter.for_config(ctx.config)
        seed, per = _measure(db, ctx.run_id, meter, ctx.config, made)
        # The seed is scored on the whole validation set (a program: its one evaluation).
        seed["metric_calls"] = float(min(len(ctx.task.val_ids) or 1, summary.get("metric_calls", 0)))
        per["metric_calls"] = (float(summary.get("metric_calls", 0)) - seed["metric_calls"]) / made
        # What admission holds back per item near a money cap (its worst case, engine/costs/budget.py).
        worst = ctx.budget.worst_case(run.orchestrator.handlers.estimate())
        limits_cfg = run_limits(getattr(ctx.task, "defaults", {}) or {}, layers)
        est = Estimate(task=ctx.task.name, mode=ctx.config.pipeline.mode, strategy=run.strategy.name,
                       backend=ctx.backend, simulated=ctx.config.uses_sim, probe_proposals=made, seed=seed,
                       per_proposal=per, limits={}, proposals=None, limited_by=None, expected={})
        _extrapolate(est, limits_cfg, worst)
        est.warnings += meter.warnings
        return est
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _extrapolate(est: Estimate, limits: BudgetConfig, worst: dict[str, float]) -> None:
    """Proposals each limit buys. A money cap stops admission once an item's worst case no longer
    fits beside what was spent, so it buys what fits below the cap minus one worst case, plus the
    last item admitted."""
    caps: dict[str, float | None] = {
        "proposals": limits.max_proposals, "usd": limits.max_usd,
        "gpu_s": None if limits.max_gpu_hours is None else limits.max_gpu_hours * 3600.0,
        "llm_calls": limits.max_llm_calls, "tokens": limits.max_tokens, "metric_calls": limits.max_metric_calls}
    est.limits = {("gpu_hours" if k == "gpu_s" else k): (v / 3600.0 if k == "gpu_s" and v is not None else v)
                  for k, v in caps.items()}
    bought: dict[str, int] = {}
    for key, cap in caps.items():
        if cap is None:
            continue
        if key == "proposals":
            bought[key] = int(cap)
        elif est.per_proposal[key] > 0:
            held = worst.get(key, 0.0) if key in ("usd", "gpu_s") else 0.0
            room = cap - est.seed[key] - held
            bought[key] = 0 if room < 0 else math.floor(room / est.per_proposal[key]) + (1 if held else 0)
    if bought:
        key = min(bought, key=bought.get)
        est.proposals, est.limited_by = bought[key], {"proposals": "max_proposals", "usd": "max_usd",
                                                      "gpu_s": "max_gpu_hours"}.get(key, f"max_{key}")
        n = est.proposals
        est.expected = {k: est.seed[k] + n * est.per_proposal[k] for k in _KEYS}
        if n < MIN_USEFUL_PROPOSALS:
            est.warnings.append(f"the budget buys about {n} proposals, fewer than {MIN_USEFUL_PROPOSALS} "
                                f"(a useful minimum){_raise_hint(est, key, worst)}")
    if limits.max_usd is not None and est.per_proposal["usd"] == 0 and not est.per_proposal["gpu_s"]:
        est.warnings.append("--max-usd is set but the calls cost $0 (a model without a price?): it limits nothing")


def _raise_hint(est: Estimate, key: str, worst: dict[str, float]) -> str:
    """The cap that buys the useful minimum (the inverse of _extrapolate's count)."""
    if key not in ("usd", "gpu_s"):
        return ""
    need = est.seed[key] + worst.get(key, 0.0) + (MIN_USEFUL_PROPOSALS - 1) * est.per_proposal[key]
    if key == "usd":
        return f": raise --max-usd to at least ${need:.4f}"
    return f": raise --max-gpu-hours to at least {need / 3600.0:.4f}"
