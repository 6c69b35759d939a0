"""The [pipeline] section of a run's configuration: the scheduler's mode, workers, staleness,
speculation, merges and chains (engine/config/__init__.py composes it into RunConfig)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from engine.pipeline.modes import mode_named
from engine.config.service import StrictModel

DEFAULT_MAX_GAP = {"guarded": 2, "reflective": 0}
"""Gap thresholds when max_gap is unset: guarded tolerates a little staleness before discarding;
reflective repairs cheaply, so it checks every stale proposal (FlashEvolve's default)."""
REMOVED = {
    "chain_prefetch": "no speed gain and a lower held-out score on 48 seeds, simulated vllm",
    "chain_revert": "no effect on the best score or throughput on 3 seeds at 48 and 200 proposals, simulated vllm",
}
"""Knobs measured to have no effect (the figures were in their docstrings), taken out."""
DEFAULT_WORKERS = {"select": 1, "rollout": 8, "propose": 8, "evaluate": 8, "update": 1, "reflect": 4}
"""Workers of the built-in stages a [pipeline] workers table does not name. Which stages a run has
comes from its pipeline (its task kind and strategy declare them): the run's set-up checks the
names a configuration gives (engine/run/setup.py: check_stage_names). select (admission) is one
task whatever it says; the key stays because every stored run config carries it."""


class PipelineConfig(StrictModel):
    mode: Literal["async", "sync", "pxn", "chain"] = "async"
    """async: stages overlap (FlashEvolve); sync: one step at a time (GEPA); pxn: GEPA's
    parallel proposals, P parents x N mutations per step, each stage waiting for its slowest;
    chain: proposal chains that hand each step to the next at the minibatch gate and validate
    in the background (prompt and adapter tasks; engine/capabilities/gated_chain.py); on program
    tasks the evaluator is the gate (engine/capabilities/program_chain.py)."""
    chains: int = Field(default=8, gt=0)
    """chain: proposal chains at once (the most, with chains_min): the speed/quality dial. 8 by
    measurement (48 proposals, simulated vllm, 144 seeds side by side against 8): 6 are 15%
    slower and +0.010 of held-out score (se 0.003), above sequential GEPA (+0.007, se 0.003)
    but under 2x GEPA's PxN; 10 are 10% faster and -0.014 (se 0.004); 12 and more lose more
    (a proposal's head is staler). 8: 2.2x PxN, -0.005 (se 0.004) against sequential GEPA.
    Program and adapter tasks run counts measured for them (engine/pipeline/modes.py KIND_CHAINS:
    12 and 1) unless a run sets this."""
    chains_min: int | None = Field(default=None, gt=0)
    """chain: set below `chains` to let the count adapt: it starts here, a step whose candidate
    collides with another chain's head (cannot join it: the same edit or a conflict) takes a
    chain away, down to this, and chain_grow_after clean steps in a row add one, up to `chains`
    (ChainState.after_step). None: a fixed count. Off by default: it moves along the dial, not
    beyond it (144 seeds side by side against a fixed 8, as above): 6 to 8 +0.005 (se 0.003) at
    0.93 of the speed, 6 to 10 +0.001 (se 0.004) at 0.99."""
    chain_grow_after: int = Field(default=3, gt=0)
    """chain, with chains_min: clean steps in a row after which one more chain runs."""
    adapter_split: int | None = Field(default=1, gt=0)
    """adapter tasks (evotui.optimize): examples per `adapter.evaluate` call for batches whose
    traces are not kept (validation, gates), the slices evaluated at once; None: one call per
    batch, as GEPA's engine makes. Scores are per example, so only the waiting changes; an adapter
    whose setup per call is expensive wants a larger slice or None."""
    adapter_threads: int = Field(default=32, gt=0)
    """adapter tasks: threads running the adapter's calls (batches and slices in flight at once)."""
    chain_early_gate: bool = True
    """chain: decide a step's gate as soon as the missing answers could not change it, hand the
    step on and cancel the answers it no longer needs (engine/stages/chain_gate.py). The same
    decisions as waiting for all nine answers, sooner and with fewer tokens. Measured with
    chain_gate_current_head (48 proposals, rules, simulated vllm, 144 seeds side by side against
    waiting for all nine answers with the step's own head, the earlier default): 7% more
    proposals per minute (per-seed median ratio 1.074) and a held-out score higher by 0.007 on
    average (se 0.004; better on 59 seeds, worse on 41). Without chain_gate_current_head it lost
    0.006 (se 0.005) against that baseline; that the current head removes the loss points at
    failing chains going on from staler heads once passing steps end sooner."""
    chain_gate_current_head: bool = True
    """chain: when another chain moved the shared head since a step began, its gate runs the
    current head on the next minibatch (not the head the candidate was made from), and a failing
    step hands its chain on from that head with those traces instead of from a stale head
    (engine/stages/chain.py). A passing candidate is rebased onto that head in any case. With
    the early gate, on 144 seeds (as above): held-out +0.013 (se 0.004) against the own head, at
    the same speed; with the gate waiting for all nine answers, +0.002 on 48 seeds (no effect)."""
    chain_validators: int = Field(default=2, gt=0)
    """chain: full validations running at once; a waiting head that a newer head superseded is
    skipped (the newer head carries its edit)."""
    chain_validation_width: int | None = Field(default=None, gt=0)
    """chain: validation rollouts of one head running at once (None: all examples at once).
    Fewer sequences beside the chains' steps decode those steps faster on a batching server
    (the critical path), at the cost of slower background validations."""
    pxn_parents: int = Field(default=2, gt=0)
    pxn_mutations: int = Field(default=4, gt=0)
    adaptive: bool = False
    """Adaptive worker control (FlashEvolve §3.4): move workers towards the slowest stage."""
    control_interval_s: float = Field(default=2.0, gt=0)
    """Wall seconds between adaptive control decisions."""
    min_workers: dict[str, int] = Field(default_factory=dict)
    """Lower worker bound per stage for adaptive control (default 1)."""
    max_workers: dict[str, int] = Field(default_factory=dict)
    """Upper worker bound per stage for adaptive control (default 64)."""
    policy: Literal["full", "guarded", "reflective"] = "full"
    """Staleness policy (FlashEvolve §3.2): full passes everything, guarded discards items whose
    gap exceeds max_gap, reflective sends them to the reflect stage (keep, patch or discard)."""
    max_gap: int | None = Field(default=None, ge=0)
    """guarded: largest gap that passes (default 2); reflective: larger gaps are reflected on
    (default 0: every stale proposal is checked against the pool changes)."""
    workers: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_WORKERS))
    """Workers per stage; stages not named keep their defaults (DEFAULT_WORKERS, merged in)."""
    queue_capacity: int = Field(default=16, gt=0)
    """Bound of every stage's input queue (backpressure)."""
    max_in_flight: int = Field(default=8, gt=0)
    """async: most items admitted and not yet finished. Bounds the version gap (each in-flight
    item can commit at most once while another waits) and keeps parents fresh."""
    minibatch_size: int = Field(default=3, gt=0)
    merge: bool = False
    """Off unless asked, as `gepa.optimize(use_merge=False)`: a synchronous run then reproduces
    GEPA's defaults, and no mode's throughput counts merge steps that are not proposals.
    Merge (GEPA's merge, for text): after accepted proposals, combine two artifacts of the
    Pareto front (prompt tasks) or the elite (program tasks) that grew apart from a common
    ancestor, by applying both descendants' edits to it; the result is gated and validated like a
    proposal. Merges never spend the proposal budget; they use LLM and metric calls."""
    max_merges: int = Field(default=10, ge=0)
    """Most merges a run starts (GEPA's max_merge_invocations)."""
    merge_slots: int = Field(default=2, gt=0)
    """async: merges in flight at once, beside max_in_flight proposals (they use spare backend
    capacity); sync runs a merge as a step of its own."""
    merge_minibatch_size: int = Field(default=5, gt=0)
    """Validation examples, chosen where the two parents differ, that gate a merge."""
    component_selection: Literal["round_robin", "all"] = "round_robin"
    """Multi-component prompt tasks: a proposal rewrites one evolvable component, in turn per
    parent (GEPA's round robin), or all of them at once."""
    speculation: bool = False
    """Speculative evaluation (FlashEvolve §3.3): after spec_alpha of the validation set, a
    candidate whose partial score beats the pool's best enters the pool as speculative; full
    validation then confirms or removes it."""
    spec_alpha: float = Field(default=0.3, gt=0, le=1)
    """Fraction of the validation set in the speculative prefix (0 < alpha <= 1)."""
    speculative_rollout: float | None = Field(default=None, gt=0, le=1)
    """Speculative rollout completion (FlashEvolve §3.3; prompt tasks in modes async, sync, pxn):
    the rollout stage hands an item to the proposer once this fraction of its minibatch answers
    are in (one below the max score among them); the rest finish in the background and are joined
    before the minibatch gate (engine/capabilities/speculative_rollout.py). None: off."""
    reorder_k: int = Field(default=3, ge=1)
    """Examples that passed this many validations in a row leave the speculative prefix."""
    review_before_evaluate: bool = False
    """Hold each proposal for a human decision before it is evaluated (TUI review queue)."""
    review_before_commit: bool = False
    """Hold each evaluated candidate for a human decision before it enters the pool."""

    @property
    def chain_floor(self) -> int:
        """Fewest chains at once: chains_min, but never above `chains`."""
        return min(self.chains_min or self.chains, self.chains)

    def gap_for(self, policy: str) -> int:
        """The gap threshold a policy uses: max_gap if set, else the policy's default."""
        return self.max_gap if self.max_gap is not None else DEFAULT_MAX_GAP.get(policy, 0)

    @model_validator(mode="before")
    @classmethod
    def _removed_knobs(cls, data: object) -> object:
        """chain_prefetch and chain_revert were measured to have no effect and removed; a stored
        run that has them at their old default (off) resumes unchanged."""
        if isinstance(data, dict) and any(k in data for k in REMOVED):
            on = [k for k in REMOVED if data.get(k)]
            if on:
                raise ValueError(f"{on[0]} was removed ({REMOVED[on[0]]}); remove it from the configuration")
            data = {k: v for k, v in data.items() if k not in REMOVED}
        return data

    @model_validator(mode="after")
    def _bounds(self) -> "PipelineConfig":
        mode = mode_named(self.mode)
        if not mode.staleness_policies and self.policy != "full":
            raise ValueError(f"policy {self.policy!r} applies to mode async; mode {self.mode} rebases stale "
                             "heads itself (remove the policy or use mode async)")
        if mode.chains and self.speculative_rollout is not None:
            raise ValueError(f"speculative_rollout applies to modes async, sync and pxn; mode {self.mode} hands each "
                             "step the gate's answers on the next minibatch, with no rollout to cut short (remove "
                             "speculative_rollout or choose another mode)")
        for stage in set(self.min_workers) | set(self.max_workers):
            lo, hi = self.min_workers.get(stage, 1), self.max_workers.get(stage, 64)
            if lo < 1 or lo > hi:
                raise ValueError(f"stage {stage!r}: min_workers {lo} must be >= 1 and <= max_workers {hi}")
        return self

    def named_stages(self) -> dict[str, list[str]]:
        """The stages each per-stage table names, for the run's set-up to check against the stages
        the run has. `workers` holds the defaults merged in, so a key at its default value is one
        nobody set (or set to what it is anyway): only keys that change something count."""
        return {"workers": [k for k, n in self.workers.items() if DEFAULT_WORKERS.get(k) != n],
                "min_workers": list(self.min_workers), "max_workers": list(self.max_workers)}

    @field_validator("workers")
    @classmethod
    def _positive_workers(cls, v: dict[str, int]) -> dict[str, int]:
        for stage, n in v.items():
            if n < 1:
                raise ValueError(f"stage {stage!r} needs at least 1 worker")
        return {**DEFAULT_WORKERS, **v}
