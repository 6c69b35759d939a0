"""sepl's Select (blame from the feedback, round robin otherwise), component versions derived
from committed artifacts, and the hot-swap's refusals (engine/components/hot_swap.py: check_edit)."""

from __future__ import annotations

import pytest

from engine.components.versions import VersionIndex, diff, parse_spec
from engine.components import Component
from engine.components.hot_swap import HotSwapError, PinnedParents, check_edit
from engine.pool import Artifact
from engine.strategy import registry
from engine.strategy.protocols import Pick, SearchParams
from engine.strategy.sepl import blame, round_robin

NAMES = ["system", "tool_lookup", "round_total"]


def _trace(score: float, feedback: str) -> dict:
    return {"score": score, "feedback": feedback}


def test_blame_picks_the_component_the_failing_feedback_names():
    traces = [_trace(0.2, "lookup returns cents (component tool_lookup)."), _trace(1.0, "component system is fine"),
              _trace(0.4, "the tool_lookup description is silent on cents")]
    name, why = blame(NAMES, traces, "system")
    assert name == "tool_lookup" and why.startswith("blame:") and "tool_lookup 3" in why
    # The passing trace's mention of system does not count.
    assert "system" not in why


def test_blame_falls_back_to_the_round_robin_turn():
    assert blame(NAMES, [_trace(0.5, "wrong answer")], "round_total")[0] == "round_total"
    assert blame(NAMES, [], "system") == ("system", "no traces; round robin")
    # A tie that includes the turn keeps the turn.
    tie = [_trace(0.1, "component system and component round_total")]
    assert blame(NAMES, tie, "round_total")[0] == "round_total"
    assert blame(NAMES, tie, "tool_lookup")[0] == "system"
    # A name inside a longer word is no mention.
    assert blame(NAMES, [_trace(0.1, "the subsystem failed")], "tool_lookup")[0] == "tool_lookup"
    assert round_robin(NAMES, [], "tool_lookup") == ("tool_lookup", "round robin (GEPA)")


def test_sepl_strategies_are_registered_audited_and_gated():
    for name, choice in (("sepl", blame), ("sepl-rr", round_robin)):
        st = registry.build(name, "prompt", SearchParams())
        assert st.audited and st.acceptance.gated and not st.merges and st.component_choice is choice


def _art(aid: str, parents: tuple[str, ...], version: int, **texts: str) -> Artifact:
    parts = tuple(Component(n, t, n != "house") for n, t in texts.items())
    return Artifact(aid, "", parents, version, {"v0": 0.5}, status="seed" if not parents else "confirmed",
                    components=parts)


def test_versions_bump_the_patch_on_every_commit_that_changes_a_component():
    seed = _art("a0", (), 1, system="s0", house="h")
    a1 = _art("a1", ("a0",), 2, system="s1", house="h")
    a2 = _art("a2", ("a0",), 3, system="s2", house="h")
    a3 = _art("a3", ("a1", "a2"), 4, system="s2", house="h")  # a merge that kept a2's text
    a4 = _art("a4", ("a3",), 5, system="s1", house="h")  # back to a1's text: still a new commit
    removed = Artifact("a5", "", ("a4",), 6, {}, status="removed", components=(Component("system", "zz"),))
    index = VersionIndex([a4, removed, a2, seed, a3, a1])  # any order: commit order is rebuilt
    assert [(v.version, v.artifact_id, v.parent_version) for v in index.history["system"]] == [
        ("1.0.0", "a0", None), ("1.0.1", "a1", "1.0.0"), ("1.0.2", "a2", "1.0.0"), ("1.0.3", "a4", "1.0.2")]
    assert index.of_artifact("a3")["system"].version == "1.0.2"
    assert [v.version for v in index.history["house"]] == ["1.0.0"] and not index.history["house"][0].evolvable
    assert index.find("system", "1.0.9") is None
    text = diff(index.find("system", "1.0.0"), index.find("system", "1.0.3"))
    assert "--- system@1.0.0" in text and "+s1" in text
    assert parse_spec("tool_lookup@1.0.12") == ("tool_lookup", "1.0.12")
    assert parse_spec("a000012") is None and parse_spec("x@1.0") is None


def test_hot_swap_refuses_frozen_unknown_empty_unchanged_and_heading_texts():
    base = _art("a0", (), 1, system="Answer.", house="Be kind.")
    assert [c.text for c in check_edit(base, "system", "Answer briefly.")] == ["Answer briefly.", "Be kind."]
    for component, text, why in (("house", "x", "frozen"), ("nosuch", "x", "no component 'nosuch'"),
                                 ("system", "  ", "non-empty string"), ("system", 3, "non-empty string"),
                                 ("system", "Answer.", "nothing to change"),
                                 ("system", "a\n## [house]\nb", "heading line")):
        with pytest.raises(HotSwapError, match=why):
            check_edit(base, component, text)
    with pytest.raises(HotSwapError, match="no named components"):
        check_edit(Artifact("a0", "one text", (), 1, {}), "text", "x")
    with pytest.raises(HotSwapError, match="no validated artifact"):
        check_edit(None, "system", "x")


class _Selector:
    def pick_parent(self) -> Pick:
        return Pick("chosen")


class _Pinning(PinnedParents, _Selector):
    def __init__(self, pool: dict) -> None:
        self.ctx = type("Ctx", (), {"pool": _Pool(pool)})()


class _Pool(dict):
    get = dict.__getitem__  # Pool.get raises for a missing id


def test_a_hot_swap_pins_the_next_admissions_to_the_edit_then_selection_resumes():
    kind = _Pinning({"h1": Artifact("h1", "x", ("a0",), 3, {"v0": 1.0})})
    kind.pin_parent("h1", 2)
    picks = [kind.pick_parent() for _ in range(3)]
    assert [p.parent_id for p in picks] == ["h1", "h1", "chosen"] and picks[0].tags == {"hot_swap": "h1"}
    gone = _Pinning({})
    gone.pin_parent("h1", 1)
    assert gone.pick_parent().parent_id == "chosen"  # an edit no longer in the pool is not forced
