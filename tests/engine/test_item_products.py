"""Typed stage products (engine/items/products.py) and the stored payload layout they keep:
an item row written by the release before them (every key a flat payload entry) reads into the
typed products and is written back key for key, so stored runs resume unchanged."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from engine.items import (GateScores, ProgramEvaluation, Proposal, RepairDecision, Rollout, RolloutRelease, Validation,
                          WorkItem)

# A prompt item as the previous release stored it, mid-way (validated, awaiting update), with a
# key no release knows (written by a newer one): it must come back too.
OLD_PROMPT_PAYLOAD = {
    "minibatch": ["e3", "e7"], "tokens": 812,
    "gaps": {"rollout": 0, "propose": 1, "evaluate": 1},
    "traces": [{"example_id": "e3", "input": "q3", "output": "a", "score": 0.0, "feedback": "wrong"},
               {"example_id": "e7", "input": "q7", "output": "b", "score": 1.0, "feedback": "right"}],
    "parent_mb": [0.0, 1.0], "parent_mb_of": "a000002",
    "next_component": 3, "component_choice": ["system", "blamed for e3"],
    "proposal": "made", "child": "## system\nBe careful.", "changed_components": ["system"],
    "refused_components": {"tools": "frozen region altered"},
    "notes": {"guidance": "shorter", "exemplars_version": "2"},
    "child_mb": [1.0, 1.0], "val": {"v1": 1.0, "v2": 0.5}, "val_feedback": {"v1": "ok", "v2": "half"},
    "rebased": {"from_parent": "a000001", "from_version": 3, "to_parent": "a000002"},
    "reflected_at": 5, "reviewed": {"evaluate": "accept"}, "edited": True,
    "selection": {"island": 1},
    "speculative_rollout": {"seen": ["e3"], "of": 2, "late": 1, "joined": True},
    "from_a_newer_release": {"x": 1},
}

OLD_CHAIN_PROGRAM_PAYLOAD = {
    "minibatch": [], "tokens": 90, "head_text": "x = 1\n", "head_seq": 2, "head_chain": ["i000001"],
    "chain_of": "i000001", "gated": True, "next_mb": ["e1", "e2"], "gate_cancelled": 1,
    "proposal": "made", "child": "x = 2\n", "diff": "-x = 1\n+x = 2", "patch_retries": 1,
    "executor_fix": {"outcome": "repaired", "rounds": 1}, "recycled_lines": {"count": 1, "share": 0.5},
    "eval_s": 0.25, "score": 0.7, "raw_score": 0.8, "metrics": {"sum_radii": 2.1}, "feedback": {"note": "ok"},
    "rebased": {"from_seq": 1, "to_seq": 2}, "rebase_checked": True, "parent_removed": "a000004",
    "artifact_id": "a000009", "reason": "kept for the record",
    "repair": {"verdict": "patch", "reason": "moved", "at_version": 6, "best": "a000005", "changes": 2, "llm": True},
}


def _row(payload: dict, item_id: str = "i000007") -> dict:
    # As the store hands rows back: the payload decoded from its JSON column.
    return {"item_id": item_id, "created_version": 4, "parent_artifact_id": "a000002", "stage": "update",
            "created_at": 12.5, "payload": json.loads(json.dumps(payload))}


@pytest.mark.parametrize("old", [OLD_PROMPT_PAYLOAD, OLD_CHAIN_PROGRAM_PAYLOAD], ids=["prompt", "chain-program"])
def test_an_old_row_is_written_back_key_for_key(old: dict) -> None:
    item = WorkItem.from_row(_row(old))
    assert item.to_payload() == old
    # And again after a save/load cycle of its own.
    assert WorkItem.from_row(_row(item.to_payload())).to_payload() == old


def test_an_old_row_reads_into_the_rollout() -> None:
    item = WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD))
    assert item.rollout == Rollout(OLD_PROMPT_PAYLOAD["traces"], [0.0, 1.0], "a000002")
    assert item.minibatch == ["e3", "e7"] and item.tokens == 812
    assert WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD)).rollout is None


def test_an_old_row_reads_into_the_gate_and_validation() -> None:
    prompt = WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD))
    assert prompt.gate == GateScores(child_mb=[1.0, 1.0])
    assert prompt.validation == Validation({"v1": 1.0, "v2": 0.5}, {"v1": "ok", "v2": "half"})
    assert prompt.validation.mean == 0.75
    chain = WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD))
    assert chain.gate == GateScores(next_mb=["e1", "e2"], gate_cancelled=1) and chain.validation is None


def test_an_old_row_reads_into_the_items_course() -> None:
    prompt = WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD))
    assert (prompt.charged, prompt.gaps, prompt.reviewed, prompt.reflected_at) == (
        "made", {"rollout": 0, "propose": 1, "evaluate": 1}, {"evaluate": "accept"}, 5)
    assert prompt.outcome is None and prompt.reason is None and prompt.why("none given") == "none given"
    program = WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD))
    assert (program.parent_removed, program.artifact_id, program.reason) == ("a000004", "a000009", "kept for the record")
    assert program.gaps == {} and "gaps" not in program.to_payload()
    assert prompt.notes == {"guidance": "shorter", "exemplars_version": "2"} and program.notes is None


def test_an_old_row_reads_into_the_proposal() -> None:
    prompt = WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD))
    assert prompt.proposal == Proposal(child="## system\nBe careful.", changed_components=["system"], next_component=3,
                                       component_choice=["system", "blamed for e3"],
                                       refused_components={"tools": "frozen region altered"},
                                       rebased=OLD_PROMPT_PAYLOAD["rebased"], edited=True)
    program = WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD))
    assert program.proposal == Proposal(child="x = 2\n", diff="-x = 1\n+x = 2", patch_retries=1,
                                        executor_fix={"outcome": "repaired", "rounds": 1},
                                        rebased={"from_seq": 1, "to_seq": 2}, rebase_checked=True)
    assert program.chain is not None and program.chain.gated and program.chain.head_seq == 2


def test_an_old_row_reads_into_the_program_evaluation() -> None:
    program = WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD))
    assert program.evaluation == ProgramEvaluation(recycled_lines={"count": 1, "share": 0.5}, eval_s=0.25, score=0.7,
                                                   raw_score=0.8, metrics={"sum_radii": 2.1}, feedback={"note": "ok"})
    assert WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD)).evaluation is None


def test_an_old_row_reads_into_its_records() -> None:
    prompt = WorkItem.from_row(_row(OLD_PROMPT_PAYLOAD))
    assert prompt.rollout_release == RolloutRelease(["e3"], 2, 1, joined=True) and prompt.repair is None
    program = WorkItem.from_row(_row(OLD_CHAIN_PROGRAM_PAYLOAD))
    assert program.repair == RepairDecision("patch", "moved", 6, {"best": "a000005", "changes": 2, "llm": True})
    assert program.unknown_keys == {} and prompt.unknown_keys == {"from_a_newer_release": {"x": 1}}  # all else typed


def test_a_typed_key_left_in_the_payload_is_refused_not_saved_twice() -> None:
    item = WorkItem("i000001", 1, "a000001", [], "evaluate", 0.0, unknown_keys={"child": "x = 1\n"})
    with pytest.raises(ValueError, match=r"unknown_keys \['child'\] are typed fields"):
        item.to_payload()
    item.unknown_keys.clear()
    item.amend_proposal(child="x = 1\n")
    item.amend_proposal(diff="+x = 1")
    assert item.to_payload() == {"minibatch": [], "tokens": 0, "child": "x = 1\n", "diff": "+x = 1"}


def test_products_are_frozen_and_a_missing_field_is_a_missing_key() -> None:
    rollout = Rollout(None, [0.5], "a000001")
    with pytest.raises(FrozenInstanceError):
        rollout.parent_mb = [1.0]  # type: ignore[misc]
    item = WorkItem("i000001", 1, "a000001", ["e1"], "propose", 0.0, rollout=rollout)
    stored = item.to_payload()
    assert stored["parent_mb"] == [0.5] and stored["parent_mb_of"] == "a000001" and "traces" not in stored
