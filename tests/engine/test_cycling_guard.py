"""The live cycling guard (engine/code/cycling.py, [program] cycling_guard): the lineage's deletion
history, recycled-line detection (as the offline detector counts), warn / penalise / reject, the
prompt section, and the settings' validation."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.costs.budget import Budget
from engine.code import cycling
from engine.config import BudgetConfig, RunConfig
from engine.context import Tally
from engine.events import EventBus
from engine.items import Proposal, WorkItem
from engine.pool import Artifact, Pool
from engine.run.state import ProgramCounters
from engine.sandbox import EvalResult
from engine.stages import program_prompt
from engine.stages.program_stages import ProgramStages
from engine.tasks.loader import load_any_task
from engine.tasks.prompt_task import TaskError
from engine.trace.analyze import cycling as offline
from engine.trace.model import Trace


def program(*body: str) -> str:
    lines = "\n".join(f"    {b}" for b in body)
    return f"import math\n\n# EVOLVE-BLOCK-START\ndef f(x):\n{lines}\n    return y\n# EVOLVE-BLOCK-END\n"


# a0 -> a1 (deletes "y = x * 2.5" and a comment) -> a2 (deletes "z = math.sqrt(x)")
A0 = program("# scale the input first", "y = x * 2.5", "z = math.sqrt(x)", "y = y + z")
A1 = program("z = math.sqrt(x)", "y = z + 1.0")
A2 = program("y = x + 1.0")
LINEAGE = {"a0": (A0, ()), "a1": (A1, ("a0",)), "a2": (A2, ("a1",)), "b1": (A0 + "\n", ("a0",))}


def history() -> cycling.LineageHistory:
    return cycling.LineageHistory(LINEAGE.get)


def test_deletion_history_follows_first_parents_and_is_cached():
    h = history()
    assert h.of("a0").recent == ()
    assert set(h.of("a1").recent) == {"# scale the input first", "y = x * 2.5", "y = y + z"}
    assert h.of("a2").recent[:2] == ("z = math.sqrt(x)", "y = z + 1.0")  # newest deletion first
    assert set(h.cache) == {"a0", "a1", "a2"}
    assert h.of("b1").recent == ()  # a sibling lineage does not inherit a1's deletions
    # shown to the proposer: what is not in the program now, bounded
    assert h.removed_lines("a2", A2, 2) == ["z = math.sqrt(x)", "y = z + 1.0"]
    assert "y = x * 2.5" not in h.removed_lines("a2", program("y = x * 2.5"), 12)


def test_recycled_lines_classes_match_the_offline_detector():
    child = program("# scale the input first", "y = x * 2.5", "y = x * 3.7", "y = y + z  ", "brand_new_line(x)")
    found = history().check("a2", A2, child)
    assert found.by_class() == {"literal": 2, "tuning": 1, "trivial": 1}
    assert found.added == 5 and found.count == 4 and found.share == pytest.approx(0.8)
    # the offline detector counts the same lineage the same way
    rows = [("a0", A0, []), ("a1", A1, ["a0"]), ("a2", A2, ["a1"]), ("c", child, ["a2"])]
    trace = Trace(run={}, candidates=[{"candidate_id": cid, "source": src, "parent_ids": ps, "iteration": i,
                                       "created_at": float(i)} for i, (cid, src, ps) in enumerate(rows)])
    last = offline.analyze(trace)["per_edit"][-1]
    assert {k: last[k] for k in ("literal", "tuning", "trivial", "added")} == {**found.by_class(), "added": 5}


def test_short_lines_do_not_count():
    found = cycling.recycled(cycling.History().plus(["x=1", "abcd"]).memory, "a\n", "a\nx=1\nabcd\n")
    assert found.added == 0 and found.count == 0 and found.share == 0.0


def test_penalty_formula():
    assert cycling.penalised(2.0, 0.5, 0.5) == pytest.approx(1.5)
    assert cycling.penalised(2.0, 0.0, 0.5) == 2.0
    assert cycling.penalised(-2.0, 1.0, 0.5) == pytest.approx(-3.0)  # never raises a negative score


class FakeSandbox:
    note = "fake"

    def __init__(self, score: float) -> None:
        self.score = score

    async def evaluate(self, *_a, **_k) -> EvalResult:
        return EvalResult(ok=True, score=self.score, metrics={"combined_score": self.score})


class FakeStore:
    def __getattr__(self, name):
        return lambda *a, **k: None


def stages_for(guard: str, score: float = 2.0) -> ProgramStages:
    from engine.pipeline.recorder import Recorder
    from engine.stages.kinds import strategy_for
    from engine.staleness import make_policy

    task = load_any_task("circle_packing")
    task = replace(task, initial_program=A0,
                   settings=task.settings.model_copy(update={"cycling_guard": guard, "cycling_penalty": 0.5}))
    pool = Pool()
    for i, aid in enumerate(("a0", "a1", "a2")):
        text, parents = LINEAGE[aid]
        pool.add(Artifact(aid, text, parents, i, {"combined_score": 1.0}, status="seed" if i == 0 else "confirmed",
                          meta={"metrics": {"combined_score": 1.0}}))
    ctx = SimpleNamespace(task=task, pool=pool, bus=EventBus(), tally=Tally(), budget=Budget(BudgetConfig()),
                          reservations={}, reflection_llm=None, rng=random.Random(0), store=FakeStore(),
                          staleness_counts=Counter(), run_id="r", program=ProgramCounters(),
                          policy=make_policy("reflective", 0), config=RunConfig(), seed_id="a0")
    stages = ProgramStages(ctx, strategy_for(ctx), evaluator=FakeSandbox(score))
    spec = stages.pipeline()
    stages.bind(Recorder(ctx, spec.checked, spec.reflect_to, on_item_end=lambda item: None, on_fatal=lambda exc: None),
                spawn=lambda *a, **k: None)
    return stages


async def committed(stages: ProgramStages, item: WorkItem) -> Artifact:
    """The artifact update() hands to the ledger (the ledger's own bookkeeping is tested elsewhere)."""
    out: list[Artifact] = []
    stages.ledger = SimpleNamespace(commit=lambda _item, art: out.append(art))
    await stages.update(item)
    return out[0]


RECYCLING = program("y = x * 2.5", "y = y + 1.0", "w = fresh_helper(y)", "y = w - 0.25")  # 1 of 4 recycled


def item_with(child: str) -> WorkItem:
    return WorkItem("i000009", 2, "a2", [], "validate", 0.0, proposal=Proposal(child=child))


async def test_reject_fails_at_validate_and_counts():
    stages = stages_for("reject")
    item = item_with(RECYCLING)
    assert await stages.validate(item) is None
    assert item.outcome == "failed" and item.reason.startswith("cycling: 1 of 4 added lines")
    assert stages.ctx.tally.fail_reasons["filter cycling"] == 1
    assert stages.ctx.program.filter_counts["cycling"] == 1
    fresh = item_with(program("y = x + 2.0", "y = y * 3.0"))
    assert await stages.validate(fresh) is fresh  # new lines pass


async def test_warn_counts_notes_and_goes_on():
    stages = stages_for("warn")
    item = item_with(RECYCLING)
    assert await stages.validate(item) is item
    assert stages.ctx.program.filter_counts["cycling_warned"] == 1
    assert await stages.evaluate(item) is item and item.evaluation.score == 2.0  # score untouched
    meta = (await committed(stages, item)).meta
    assert meta["recycled_lines"]["count"] == 1 and meta["recycled_lines"]["lines"] == ["y = x * 2.5"]
    assert "raw_score" not in meta


async def test_penalise_scales_the_pool_score_and_keeps_the_raw_one():
    stages = stages_for("penalise", score=2.0)
    item = item_with(RECYCLING)
    assert await stages.validate(item) is item
    assert await stages.evaluate(item) is item
    art = await committed(stages, item)
    assert art.val_scores["combined_score"] == pytest.approx(2.0 * (1 - 0.5 * 0.25))
    assert art.meta["raw_score"] == 2.0 and art.meta["metrics"]["combined_score"] == 2.0
    assert stages.ctx.program.filter_counts["cycling_penalised"] == 1


async def test_off_computes_nothing():
    stages = stages_for("off")
    item = item_with(RECYCLING)
    assert await stages.validate(item) is item and item.evaluation is None
    assert stages.history.cache == {}


@pytest.mark.parametrize("guard", ["off", "warn", "reject"])
def test_prompt_section_only_when_the_guard_is_on(guard):
    stages = stages_for(guard)
    user = stages.messages_for(stages.ctx.pool.get("a2"))[1]["content"]
    if guard == "off":
        assert program_prompt.REMOVED_HEADING not in user
    else:
        section = user.split(program_prompt.REMOVED_HEADING, 1)[1].split("\n## ")[0]
        assert "- z = math.sqrt(x)" in section and "- y = x * 2.5" in section


def test_prompt_section_is_bounded():
    msgs = program_prompt.build_messages(system="s", description="", parent_id="a", parent_code="x", parent_score=1.0,
                                         metrics={}, feedback={}, last_change="", others=[], failures=[], fmt="diff",
                                         max_chars=24000, removed=[f"line_{i} = {i}" for i in range(40)])
    section = msgs[1]["content"].split(program_prompt.REMOVED_HEADING, 1)[1]
    assert section.count("\n- ") == program_prompt.REMOVED_SHOWN


def test_bad_setting_names_the_key(tmp_path: Path):
    src = Path(load_any_task("circle_packing").path)
    for name in ("initial_program.py", "evaluator.py"):
        (tmp_path / name).write_text((src / name).read_text())
    toml = (src / "task.toml").read_text().replace("[program]", '[program]\ncycling_guard = "sometimes"')
    (tmp_path / "task.toml").write_text(toml)
    with pytest.raises(TaskError, match="cycling_guard"):
        load_any_task(str(tmp_path))
    (tmp_path / "task.toml").write_text(toml.replace('"sometimes"', '"reject"\ncycling_penalty = 2'))
    with pytest.raises(TaskError, match="cycling_penalty"):
        load_any_task(str(tmp_path))
