"""Changes already tried on a parent are kept in the run state and shown to the proposer
(engine/stages/program_tried.py), and the simulated model mostly proposes something else."""

from __future__ import annotations

import random

from engine.code.languages import PYTHON
from engine.code.patches import apply_reply, unified_diff
from engine.items import WorkItem
from engine.llm.sim import program_model
from engine.run.state import ProgramCounters
from engine.stages import program_prompt
from engine.stages.program_tried import IN_FLIGHT, PARENTS_KEPT, TriedChanges

PROGRAM = """import math

# EVOLVE-BLOCK-START
def f():
    k = 3
    return k * 2
# EVOLVE-BLOCK-END
"""


def _item(parent: str, diff: str | None, n: int = 0) -> WorkItem:
    item = WorkItem(item_id=f"i{n:06d}", created_version=0, parent_id=parent, minibatch=[], stage="propose", created_at=0.0)
    item.amend_proposal(child="x", diff=diff)
    return item


def test_kept_per_parent_latest_first_out_and_bounded():
    store: dict = {}
    tried = TriedChanges(store, shown=2)
    for n in range(3):
        tried.note(_item("a1", f"diff {n}", n), f"failed {n}")
    tried.scored(_item("a2", "diff x"), 0.5, 0.75)
    tried.note(_item("a3", None), "no diff: not kept")
    assert tried.for_parent("a1") == [("diff 1", "failed 1"), ("diff 2", "failed 2")]
    assert tried.for_parent("a2") == [("diff x", "scored 0.5 (the current program scores 0.75)")]
    assert tried.for_parent("a3") == [] and "a3" not in store
    for n in range(PARENTS_KEPT + 5):
        tried.note(_item(f"p{n}", "d", n), "o")
    assert len(store) == PARENTS_KEPT and "a1" not in store and f"p{PARENTS_KEPT + 4}" in store
    assert TriedChanges({}, shown=0).for_parent("a1") == []


def test_changes_in_flight_on_the_same_program_are_listed_after_the_tried_ones():
    tried = TriedChanges({}, shown=2)
    tried.note(_item("a1", "diff ended", 1), "scored 0.4")
    waiting = [_item("a1", f"diff waiting {n}", n) for n in range(2, 5)]
    other_parent, no_diff, ended = _item("a2", "diff elsewhere", 5), _item("a1", None, 6), _item("a1", "diff done", 7)
    ended.end("accepted")
    shown = tried.for_parent("a1", [*waiting, other_parent, no_diff, ended])
    # The latest `shown` of those still waiting, each marked as not evaluated yet.
    assert shown == [("diff ended", "scored 0.4"), ("diff waiting 3", IN_FLIGHT), ("diff waiting 4", IN_FLIGHT)]
    assert TriedChanges({}, shown=0).for_parent("a1", waiting) == []


def test_the_record_survives_a_save_and_restore():
    counters = ProgramCounters()
    TriedChanges(counters.tried, shown=4).note(_item("a7", "--- a\n+++ b\n-x\n+y"), "duplicate: in the pool")
    back = ProgramCounters.from_dict(counters.to_dict())
    assert TriedChanges(back.tried, shown=4).for_parent("a7") == [("--- a\n+++ b\n-x\n+y", "duplicate: in the pool")]
    assert ProgramCounters.from_dict({}).tried == {}  # a run state saved before the field existed


def _request(tried: list[tuple[str, str]] | None) -> str:
    messages = program_prompt.build_messages(
        system=program_prompt.system_message("", "diff"), description="Raise f().", parent_id="a1",
        parent_code=PROGRAM, parent_score=6.0, metrics={}, feedback={}, last_change="", others=[],
        failures=[], fmt="diff", max_chars=24000, tried=tried)
    return messages[1]["content"]


def test_the_prompt_shows_each_change_with_its_outcome():
    child = PROGRAM.replace("k = 3", "k = 4")
    diff = unified_diff(PROGRAM, child, "a1", "child")
    text = _request([(diff, "scored 8 (the current program scores 6)")])
    assert program_prompt.TRIED_HEADING in text
    assert "- scored 8 (the current program scores 6)\n```diff\n" in text and "+    k = 4" in text
    assert program_prompt.TRIED_HEADING not in _request(None)


def _child(request: str, seed: int) -> str | None:
    messages = [{"role": "system", "content": program_prompt.system_message("", "diff")},
                {"role": "user", "content": request}]
    reply = program_model.propose(messages, str, random.Random(seed))
    patch = apply_reply(PROGRAM, reply, "diff", PYTHON)
    return patch.text if patch.ok else None


def test_the_simulated_model_mostly_avoids_a_change_it_is_told_was_tried():
    seeds = range(300)
    plain = [_child(_request(None), s) for s in seeds]
    made = [c for c in plain if c is not None and c != PROGRAM]
    common = max(sorted(set(made)), key=made.count)  # the edit this tiny program gets most often (ties: the first)
    listed = _request([(unified_diff(PROGRAM, common, "a1", "child"), "scored 5 (the current program scores 6)")])
    told = [_child(listed, s) for s in seeds]
    assert plain.count(common) >= 30
    assert told.count(common) <= plain.count(common) // 3
    # A draw that repeats nothing listed is the draw it would have been: no randomness is spent on it.
    assert [t for p, t in zip(plain, told) if p != common] == [p for p in plain if p != common]
