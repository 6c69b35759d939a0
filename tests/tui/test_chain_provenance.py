"""Chain-mode lineage (D4): a step three-way merged onto a newer head says so with its head
steps, never `(vNone -> vNone)`; a reflective patch keeps its pool versions."""

from evotui.tui.backend import ArtifactView, provenance
from evotui.tui.screens.lineage import label


def test_a_chain_rebase_names_its_head_steps() -> None:
    meta = {"rebased": {"from_seq": 3, "to_seq": 5, "from_parent": "a000000", "mechanical": True}}
    note = provenance(meta, ["a000007"])
    assert note == "merged onto the newer chain head from a000000 (head 3 -> 5)"
    assert "None" not in str(label(ArtifactView("a000012", "a000007", 12, "confirmed", 0.5, "text", note)))


def test_missing_fields_are_left_out_not_printed_as_none() -> None:
    assert provenance({"rebased": {"from_parent": "a000003"}}, []) == "patched from a000003"
    assert provenance({"rebased": {"from_seq": 2}}, []) == "merged onto the newer chain head"
    assert provenance({"rebased": {"from_parent": "a000003", "from_version": 4, "to_version": 9}}, []) == (
        "patched from a000003 (v4 -> v9)")
