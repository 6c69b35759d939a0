"""The scheduler's execution modes, as data: what each mode allows and how it admits items.

Every question about a mode ("does it stream?", "may a staleness policy apply?") is a field
here, so no other module compares mode names. Imports nothing from engine (config validates
against this table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str
    admission: str
    """How items are admitted: "stream" (up to max_in_flight), "one" (the next step once the
    previous left the pipeline), "lockstep" (P x N items per step, each stage waiting for its
    slowest) or "chains" (a fixed number of proposal chains)."""
    configured_workers: bool
    """Stages get the configured worker counts (else one worker: the scheduler drives steps)."""
    adaptive: bool
    """Adaptive worker control may run."""
    staleness_policies: bool
    """A staleness policy other than full may apply (chain rebases stale heads itself)."""
    speculation: frozenset[str]
    """Task kinds speculation runs on in this mode: prompts and adapters insert after a validation
    prefix (not in chain, which hands candidates on at its minibatch gate already); programs after
    a cascade stage, and in chain the shared head moves to the speculative program at once."""
    merges: bool
    """Merge items are admitted (every chain head already unites all earlier heads)."""
    kinds: frozenset[str]
    """Task kinds the mode runs."""

    @property
    def streams(self) -> bool:
        return self.admission == "stream"

    @property
    def one_at_a_time(self) -> bool:
        return self.admission == "one"

    @property
    def lockstep(self) -> bool:
        return self.admission == "lockstep"

    @property
    def chains(self) -> bool:
        return self.admission == "chains"


_BOTH = frozenset({"prompt", "program", "adapter"})
"""Kinds of the modes that stream, step or lockstep (adapter: a Python adapter, evotui/library/api.py)."""

MODES: dict[str, Mode] = {
    m.name: m for m in (
        Mode("async", "stream", configured_workers=True, adaptive=True, staleness_policies=True, speculation=_BOTH,
             merges=True, kinds=_BOTH),
        Mode("sync", "one", configured_workers=False, adaptive=False, staleness_policies=True, speculation=_BOTH,
             merges=True, kinds=_BOTH),
        Mode("pxn", "lockstep", configured_workers=False, adaptive=False, staleness_policies=True,
             speculation=_BOTH, merges=True, kinds=_BOTH),
        Mode("chain", "chains", configured_workers=False, adaptive=False, staleness_policies=False,
             speculation=frozenset({"program"}), merges=False, kinds=_BOTH),
    )
}


ASYNC_ONLY = {"policy": "full", "speculation": False, "merge": False, "adaptive": False,
              "speculative_rollout": None}
"""[pipeline] options only mode async serves, with their off values."""


KIND_CHAINS = {"adapter": 1, "program": 12}
"""Chains of mode chain on the kinds whose count was measured apart from the pipeline's default
(`chains`, 8, measured on prompt tasks); a run that sets `chains` keeps its own. Adapter tasks: 1
(throughput_default). Program tasks: 12 (48 proposals, simulated vllm, 24 seeds, paired by seed
against 8 chains): 1.27x and 1.29x the evaluated proposals per minute on circle_packing and
heilbronn at best -0.023 +- 0.025 and -0.002 +- 0.008, no difference resolvable at 24 seeds,
and 2.06x and 2.35x OpenEvolve's pace (8: 1.63x and 1.83x). Since steps that cannot join a newer
head are evaluated as branches, more chains no longer cost heilbronn its best (16 chains lost
0.022 against 8 before)."""
KIND_CHAINS_LAYER = "evotui's chain count for the task kind"
"""The configuration layer that sets KIND_CHAINS for a run that chose mode chain itself."""

DEFAULT_MODE_LAYER = "evotui's default mode (chain)"
"""The name of the configuration layer throughput_default adds (config show lists it)."""


def throughput_default(kind: str, measured: bool, pipeline: dict) -> dict | None:
    """The fastest quality-keeping mode as a new run's default: mode chain, measured against the
    real peers on prompt tasks, against sync and async on program tasks (README "Benchmark") and
    against gepa.optimize on adapter tasks (README "Python API"), unless the user chose a mode,
    asked for an option only async serves, or the run is one chain was not measured with: its
    strategy is not the one the kind's default was measured with (`measured`, from the strategy
    registry: a chain step starts from the shared head, not from loongflow's islands or
    contextevolve's pick). Prompt tasks with named components too (agent_tools, 32 proposals, 6
    seeds: chain 6.87x sync at best -0.010 +- 0.007, async 5.34x at -0.230 +- 0.034). None: the
    plain defaults (mode async)."""
    if "mode" in pipeline or any(key in pipeline and pipeline[key] != off for key, off in ASYNC_ONLY.items()):
        return None
    if not measured:
        return None
    # Adapter tasks run one chain: at the metric-call budgets such runs have, depth beats breadth;
    # the speed comes from the gate's hand-on, background validation and evaluation in slices.
    return {"pipeline": {"mode": "chain", **kind_chains(kind, pipeline)}}


def kind_chains(kind: str, pipeline: dict) -> dict:
    """{"chains": n} when mode chain on this kind runs a measured count of its own (KIND_CHAINS)
    and the run did not set one; {} otherwise."""
    return {} if "chains" in pipeline or kind not in KIND_CHAINS else {"chains": KIND_CHAINS[kind]}


def speculation_refusal(mode: Mode, kind: str) -> str:
    """Why speculation cannot run in `mode` on a task of `kind` ("" when it can)."""
    if kind in mode.speculation:
        return ""
    return (f"speculation in mode {mode.name} applies to {' and '.join(sorted(mode.speculation))} tasks; it hands "
            f"{kind} candidates on at the minibatch gate already (remove speculation or use mode async)")


def mode_named(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}; modes are {', '.join(MODES)}") from None
