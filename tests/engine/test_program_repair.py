"""LLM reflective repair of stale program proposals (engine/capabilities/program_repair.py) and the
simulator's answer to it (engine/llm/sim/program_repair_answers.py), on circle_packing's program."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from engine.capabilities.program_repair import build_request, token_budget
from engine.code.patches import unified_diff
from engine.config import BudgetConfig, RunConfig
from engine.context import Tally
from engine.costs.budget import Budget
from engine.events import EventBus
from engine.items import Proposal, WorkItem
from engine.llm.client import ChatResult
from engine.llm.errors import LLMError
from engine.llm.sim.answer import answer as sim_answer
from engine.pipeline.recorder import Recorder
from engine.pool import Artifact, Pool
from engine.run.state import ProgramCounters
from engine.stages.kinds import strategy_for
from engine.stages.program_stages import ProgramStages
from engine.staleness import make_policy
from engine.steering.state import SteeringState
from engine.tasks.loader import load_any_task


class SimLLM:
    """The simulator's reply to each request (no server), or scripted replies; records requests."""

    def __init__(self, replies: list[str] | None = None, error: LLMError | None = None) -> None:
        self.replies, self.error = replies, error
        self.requests: list[list[dict]] = []

    async def chat(self, messages, *, stage, **kw):
        self.requests.append(messages)
        if self.error is not None:
            raise self.error
        text = self.replies.pop(0) if self.replies is not None else sim_answer(messages, stage, random.Random(0))
        return ChatResult(text, "stop", 100, 20, 0.0, 0)


class RowStore:
    """Keeps the staleness rows; every other store call does nothing."""

    def __init__(self) -> None:
        self.staleness: list[dict] = []

    def insert_staleness(self, run_id, **row):
        self.staleness.append(row)

    def __getattr__(self, name):
        return lambda *a, **k: None


TASK = load_any_task("circle_packing")
SEED = TASK.initial_program


def _stages(llm, fmt: str = "diff", max_prompt_chars: int = 24000) -> ProgramStages:
    task = replace(TASK, settings=TASK.settings.model_copy(update={"patch_format": fmt,
                                                                    "max_prompt_chars": max_prompt_chars}))
    pool = Pool()
    pool.add(Artifact("a000000", SEED, (), 0, {"combined_score": 0.6}, status="seed"))
    ctx = SimpleCtx(task=task, pool=pool, bus=EventBus(), tally=Tally(), budget=Budget(BudgetConfig()),
                    reservations={}, reflection_llm=llm, rng=random.Random(0), store=RowStore(),
                    staleness_counts=Counter(), run_id="r", program=ProgramCounters(),
                    policy=make_policy("reflective", 0), config=RunConfig(), steering=SteeringState())
    stages = ProgramStages(ctx, strategy_for(ctx))
    spec = stages.pipeline()
    stages.bind(Recorder(ctx, spec.checked, spec.reflect_to, on_item_end=lambda item: None,
                         on_fatal=lambda exc: None), spawn=lambda *a, **k: None)
    return stages


class SimpleCtx:
    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)


def _commit(stages, artifact_id: str, parent_id: str, text: str, score: float) -> None:
    parent = stages.ctx.pool.get(parent_id)
    stages.ctx.pool.add(Artifact(artifact_id, text, (parent_id,), 0, {"combined_score": score},
                                 meta={"diff": unified_diff(parent.text, text, parent_id, "child")}))


def _stale(child: str, item_id: str = "i000009") -> WorkItem:
    """A proposal made from the seed at pool version 1, before the commits a test adds."""
    return WorkItem(item_id, 1, "a000000", [], "evaluate", 0.0,
                    proposal=Proposal(child=child, diff=unified_diff(SEED, child, "a000000", "child")))


X2 = SEED.replace("spacing_x = 0.1", "spacing_x = 0.2")


@pytest.mark.parametrize("fmt", ["diff", "udiff", "full"])
async def test_a_stale_edit_of_other_lines_is_patched_onto_the_best(fmt):
    llm = SimLLM()
    stages = _stages(llm, fmt)
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_y = 0.1", "spacing_y = 0.3"), 0.7)
    item = await stages.reflect(_stale(X2))
    assert item is not None and item.parent_id == "a000001"
    assert "spacing_x = 0.2" in item.proposal.child and "spacing_y = 0.3" in item.proposal.child
    assert item.proposal.rebased["from_parent"] == "a000000" and item.proposal.rebased["mechanical"] is False
    assert "-    spacing_x = 0.1" in item.proposal.diff and "spacing_y" not in item.proposal.diff.split("@@")[-1].replace(
        "    spacing_y = 0.3", "")  # the new diff is against the best: only the carried edit changes
    request = llm.requests[0][1]["content"]
    assert "+    spacing_x = 0.2" in request  # the proposal's own change
    assert "### v2: a000001 from a000000" in request and "+    spacing_y = 0.3" in request  # the commit since
    assert f"evotui-repair-format: {fmt}" in request
    row = stages.ctx.store.staleness[-1]
    assert (row["stage"], row["decision"], row["policy"]) == ("reflect", "patch", "reflective")
    assert row["detail"]["shown"] == 1 and row["detail"]["omitted"] == 0 and row["detail"]["llm"] is True
    assert item.notes["stale_repair"].startswith("patch at pool v2 (gap 1)")
    assert stages.ctx.staleness_counts["reflect_patch"] == 1
    assert stages._rebase(item) == ""  # evaluate takes the patched program (filters ran once, in the repair)


async def test_a_stale_edit_of_lines_a_newer_commit_changed_is_discarded():
    stages = _stages(SimLLM())
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_x = 0.1", "spacing_x = 0.3"), 0.7)
    item = _stale(X2)
    assert await stages.reflect(item) is None
    assert item.outcome == "discarded_reflect"
    assert "newer commit changed the lines" in item.reason
    assert item.repair.verdict == "discard"
    assert stages.ctx.store.staleness[-1]["decision"] == "discard"


async def test_a_proposal_whose_parent_is_still_the_best_is_kept_as_it_is():
    llm = SimLLM()
    stages = _stages(llm)
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_y = 0.1", "spacing_y = 0.3"), 0.5)
    item = await stages.reflect(_stale(X2))
    assert item is not None and item.parent_id == "a000000" and item.proposal.child == X2
    assert item.reflected_at == 2 and item.proposal.rebased is None
    assert stages.ctx.store.staleness[-1]["decision"] == "keep"
    assert "the current best is the proposal's parent" in llm.requests[0][1]["content"]


async def test_a_program_committed_since_discards_without_a_call():
    llm = SimLLM()
    stages = _stages(llm)
    _commit(stages, "a000001", "a000000", X2, 0.7)
    item = _stale(X2)
    assert await stages.reflect(item) is None and llm.requests == []
    assert item.repair.to_record() == {"verdict": "discard", "reason": "an identical program was committed since",
                                      "at_version": 2, "changes": 1, "llm": False}


@pytest.mark.parametrize("reply, why", [
    ("VERDICT: patch\nREASON: x\n<<<<<<< SEARCH\n    nope = 1\n=======\n    nope = 2\n>>>>>>> REPLACE",
     "patch does not apply to the current best"),
    ("VERDICT: patch\nREASON: x\n<<<<<<< SEARCH\n    return centers, radii, float(np.sum(radii))\n=======\n"
     "    return centers, radii, 99.0\n>>>>>>> REPLACE", "patch does not apply to the current best"),
    ("I think it is fine.", "no VERDICT line"),
])
async def test_a_bad_answer_is_malformed_and_discarded(reply, why):
    stages = _stages(SimLLM([reply]))
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_y = 0.1", "spacing_y = 0.3"), 0.7)
    item = _stale(X2)
    assert await stages.reflect(item) is None
    assert item.repair.verdict == "malformed" and why in item.repair.reason
    assert stages.ctx.staleness_counts["reflect_malformed"] == 1


async def test_an_edit_outside_the_evolve_block_is_refused():
    reply = ("VERDICT: patch\nREASON: x\n<<<<<<< SEARCH\ndef run_packing():\n=======\ndef run_packing():  # x\n"
             ">>>>>>> REPLACE")
    stages = _stages(SimLLM([reply]))
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_y = 0.1", "spacing_y = 0.3"), 0.7)
    item = _stale(X2)
    assert await stages.reflect(item) is None
    assert item.repair.verdict == "malformed" and stages.filters.counts["region"] == 1


async def test_an_llm_error_is_a_malformed_repair():
    stages = _stages(SimLLM(error=LLMError("timeout", "read timeout")))
    _commit(stages, "a000001", "a000000", SEED.replace("spacing_y = 0.1", "spacing_y = 0.3"), 0.7)
    item = _stale(X2)
    assert await stages.reflect(item) is None and item.repair.reason == "LLM error: timeout"


def test_the_commits_shown_are_bounded_by_the_token_budget():
    stages = _stages(SimLLM(), max_prompt_chars=4000)
    pool, parent = stages.ctx.pool, "a000000"
    changes = []
    for n in range(1, 13):  # each commit adds a long comment line: a large diff
        text = pool.get(parent).text.replace("    n = 26\n", f"    n = 26\n    # {'note %d ' % n * 40}\n")
        _commit(stages, f"a{n:06d}", parent, text, 0.6 + n / 100)
        changes.append((pool.version, pool.get(f"a{n:06d}"), pool.get(parent).val_mean))
        parent = f"a{n:06d}"
    best = pool.best()
    shown = build_request(best, pool.get("a000000"), _stale(X2), pool.version, changes, fmt="diff",
                          language=TASK.language, budget_tokens=token_budget(4000))
    user = shown.messages[1]["content"]
    assert 0 < shown.shown < 12 and shown.shown + shown.omitted == 12
    assert f"[... {shown.omitted} older commit(s) not shown" in user
    assert "### v13: a000012" in user and "### v2: a000001" not in user  # the newest are the ones shown
    assert len(user) <= 4000 + 1500  # the sections' shares plus headings
