"""The bench's named modes: pipeline settings side by side (`evotui bench --modes`). Kept apart
from evotui/bench/run.py so the CLI can list them in its help without importing the engine."""

# Reflective and guarded share the threshold, so their wasted tokens compare like for like.
_REFLECTIVE = {"mode": "async", "policy": "reflective", "max_gap": 2}
MODES = {
    # What a new run of the task gets when it names no mode (engine/pipeline/modes.py chooses).
    "default": {},
    "sync": {"pipeline": {"mode": "sync"}},
    "pxn": {"pipeline": {"mode": "pxn"}},
    "async": {"pipeline": {"mode": "async", "policy": "full"}},
    "async-guarded": {"pipeline": {"mode": "async", "policy": "guarded", "max_gap": 2}},
    "async-reflective": {"pipeline": dict(_REFLECTIVE)},
    "async-spec": {"pipeline": {**_REFLECTIVE, "speculation": True}},
    # Speculative rollout completion (engine/capabilities/speculative_rollout.py): the proposer
    # starts after 2 of the 3 minibatch answers (the default minibatch); set against "sync" and
    # "async" in the same run.
    "sync-specroll": {"pipeline": {"mode": "sync", "speculative_rollout": 0.6}},
    "async-specroll": {"pipeline": {"mode": "async", "policy": "full", "speculative_rollout": 0.6}},
    # The quality end of the throughput/quality frontier: fewer items in flight, fresher parents.
    "async-4": {"pipeline": {**_REFLECTIVE, "speculation": True, "max_in_flight": 4}},
    "async-best": {"pipeline": {**_REFLECTIVE, "speculation": True, "adaptive": True, "max_in_flight": 16,
                                "workers": {"rollout": 16, "propose": 16, "evaluate": 16, "reflect": 8}}},
    # Proposal chains (engine/stages/chain.py): async steps handed on at the gate, shared head.
    "chain": {"pipeline": {"mode": "chain"}},  # the kind's chain count (8; program tasks 12, adapters 1)
    # Program tasks with a cascade: a step whose early stage beats the best hands its chain on
    # (engine/capabilities/program_speculation.py); set against "chain" on a slow cascade.
    "chain-spec": {"pipeline": {"mode": "chain", "speculation": True}},
    # The chain count adapting to collisions between chains_min and chains (engine/config/__init__.py).
    "chain-6to8": {"pipeline": {"mode": "chain", "chains_min": 6, "chains": 8}},
    "chain-6to10": {"pipeline": {"mode": "chain", "chains_min": 6, "chains": 10}},
    "chain-6to12": {"pipeline": {"mode": "chain", "chains_min": 6, "chains": 12}},
    "chain-8to12": {"pipeline": {"mode": "chain", "chains_min": 8, "chains": 12}},
    "chain-6": {"pipeline": {"mode": "chain", "chains": 6}},
    "chain-4": {"pipeline": {"mode": "chain", "chains": 4}},
    "chain-8": {"pipeline": {"mode": "chain", "chains": 8}},
    "chain-10": {"pipeline": {"mode": "chain", "chains": 10}},
    "chain-12": {"pipeline": {"mode": "chain", "chains": 12}},
    "chain-16": {"pipeline": {"mode": "chain", "chains": 16}},
    # One background validation at a time: heads superseded meanwhile are never validated (the
    # newer head carries their edits), so fewer sequences share the GPU with the chains' steps.
    "chain-8v1": {"pipeline": {"mode": "chain", "chains": 8, "chain_validators": 1}},
    "chain-10v1": {"pipeline": {"mode": "chain", "chains": 10, "chain_validators": 1}},
    "chain-12v1": {"pipeline": {"mode": "chain", "chains": 12, "chain_validators": 1}},
    # A head's validation rollouts 10 (5) at a time: fewer sequences beside the chains' steps
    # on the server, so the steps decode faster; the validations take longer.
    "chain-8w10": {"pipeline": {"mode": "chain", "chains": 8, "chain_validation_width": 10}},
    "chain-8w5": {"pipeline": {"mode": "chain", "chains": 8, "chain_validation_width": 5}},
    # The default's two gate options off one at a time, and both (the earlier default): a gate
    # that waits for all nine answers, and one that runs the step's own head, not the current one.
    "chain-8-wait": {"pipeline": {"mode": "chain", "chains": 8, "chain_early_gate": False}},
    "chain-8-own": {"pipeline": {"mode": "chain", "chains": 8, "chain_gate_current_head": False}},
    "chain-8-wait-own": {"pipeline": {"mode": "chain", "chains": 8, "chain_early_gate": False,
                                      "chain_gate_current_head": False}},
    # A third background validation, so the validations keep up with the faster steps.
    "chain-8v3": {"pipeline": {"mode": "chain", "chains": 8, "chain_validators": 3}},
    # Saturation, not quality: enough items in flight, and client requests up to the backend's
    # capacity, to keep the backend full (use with a larger --proposals).
    "async-max": {"pipeline": {"mode": "async", "max_in_flight": 192, "queue_capacity": 384, "merge": False,
                               "workers": {"rollout": 192, "propose": 192, "evaluate": 192}}},
}
DEFAULT_MODES = "sync,pxn,async,async-guarded,async-reflective,async-best,chain-4,chain"
