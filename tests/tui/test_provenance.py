"""The lineage view's provenance note: merges, reflective rebases and review decisions."""

from evotui.tui.backend import provenance
from evotui.tui.screens.lineage import label
from evotui.tui.backend import ArtifactView


def test_merge_rebase_and_review_notes_are_combined_in_order() -> None:
    meta = {"rebased": {"from_parent": "a000003", "from_version": 4, "to_version": 9}}
    assert provenance(meta, ["a000007", "a000011"], "approve at evaluate") == (
        "merge of a000007 + a000011 · patched from a000003 (v4 -> v9) · approve at evaluate")
    assert provenance({}, ["a000001"]) == ""
    assert provenance({"rebased": "not a dict"}, []) == ""


def test_label_shows_the_provenance() -> None:
    view = ArtifactView("a000012", "a000007", 12, "confirmed", 0.5, "text", provenance({}, ["a000007", "a000011"]))
    assert label(view).endswith("confirmed · merge of a000007 + a000011")
