"""FlashEvolve features: adaptive worker control, validation reordering, reflective staleness,
speculative evaluation, pool invariants, pxn lockstep steps and human review gates.

Pure parts (decide, ValidationOrder, policies, parsers, the simulated judge, the pool) are tested
directly; everything else runs the real engine (EngineRun over a temp SQLite store) against the
scripted LLM of tests/engine/fakes.py, held with asyncio.Event gates, never with sleeps.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import ConfigError, build_config
from engine.pipeline.control import AdaptiveController, decide
from engine.pipeline.review import ReviewError
from engine.pipeline.stage import RateMeter
from engine.staleness import ReflectivePolicy, make_policy
from engine.pool import Artifact, Pool
from engine.selection.val_order import ValidationOrder
from engine.stages.reflection import build_reflect_messages, parse_verdict
from engine.tasks import ruleworld_sim as stale_model
from engine.tasks.ruleworld import RULES
from tests.engine.fakes import VAL_KEYWORDS, completion, harness, until  # noqa: F401  (harness is a fixture)

SCALABLE = ("rollout", "propose", "evaluate", "validate", "reflect")
"""What the two kinds' pipelines let adaptive control resize (every stage but update)."""


def is_item(stage: str, item_id: str | None = None):
    return lambda r: r.stage == stage and r.item_id is not None and (item_id is None or r.item_id == item_id)


def fenced(*lines: str):
    return completion("New instructions:\n```\n" + "\n".join(lines) + "\n```\n")


def kw_lines(*keywords: str) -> list[str]:
    return [f"KEYWORD-{k}" for k in keywords]


# == 1. adaptive control ============================================================================


def test_decide_below_half_gets_a_worker_above_twice_loses_one() -> None:
    # median of [0.4, 1.0, 1.0, 2.5] is 1.0
    assert decide({"rollout": 0.4, "propose": 1.0, "evaluate": 1.0, "reflect": 2.5}) == {"rollout": 1, "reflect": -1}


def test_decide_thresholds_are_strict() -> None:
    # exactly half and exactly twice the median (1.0) stay as they are
    assert decide({"rollout": 0.5, "propose": 1.0, "evaluate": 1.0, "reflect": 2.0}) == {}
    assert decide({"rollout": 0.499, "propose": 1.0, "evaluate": 1.0, "reflect": 2.001}) == {"rollout": 1, "reflect": -1}


def test_decide_ignores_stages_that_produced_nothing() -> None:
    # With the idle stage counted, the median would be 1.0 and rollout (0) would get a worker.
    assert decide({"rollout": 0.0, "propose": 1.0, "evaluate": 1.0}) == {}
    # Only the active ones form the median: [0.1, 1.0] -> 0.55; 0.1 < 0.275, 1.0 < 1.1.
    assert decide({"rollout": 0.0, "propose": 0.1, "evaluate": 1.0}) == {"propose": 1}


@pytest.mark.parametrize("rates", [{}, {"rollout": 5.0}, {"rollout": 5.0, "propose": 0.0, "evaluate": 0.0}])
def test_decide_needs_two_active_stages(rates) -> None:
    assert decide(rates) == {}


@given(st.dictionaries(st.sampled_from(SCALABLE), st.floats(min_value=0, max_value=100, allow_nan=False)))
def test_decide_property(rates) -> None:
    deltas = decide(rates)
    active = {s: r for s, r in rates.items() if r > 0}
    assert set(deltas) <= set(active)
    assert set(deltas.values()) <= {1, -1}
    if len(active) < 2:
        assert deltas == {}
        return
    med = sorted(active.values())
    m = len(med) // 2
    median = med[m] if len(med) % 2 else (med[m - 1] + med[m]) / 2
    for s, r in active.items():
        assert deltas.get(s, 0) == (1 if r < median / 2 else -1 if r > median * 2 else 0)


class FixedMeter:
    def __init__(self, rate: float) -> None:
        self._rate = rate

    def rate(self) -> float:
        return self._rate


@dataclass
class LightStage:
    meter: FixedMeter
    target_workers: int
    min_workers: int = 1
    max_workers: int = 64


def light_stages(**spec) -> dict[str, LightStage]:
    return {name: LightStage(FixedMeter(rate), target, lo, hi) for name, (rate, target, lo, hi) in spec.items()}


def test_controller_step_respects_bounds_and_gives_reasons() -> None:
    stages = light_stages(
        rollout=(0.1, 4, 1, 4),    # slow but already at its max: unchanged
        propose=(0.1, 2, 1, 8),    # slow: 2 -> 3
        evaluate=(1.0, 3, 1, 8),   # the median
        validate=(5.0, 1, 1, 8),   # fast but already at its min: unchanged
        reflect=(5.0, 3, 1, 8),    # fast: 3 -> 2
        # not controlled: they must neither move nor shift the median (else it would be 5.0)
        update=(50.0, 1, 1, 8),
        select=(50.0, 1, 1, 8),
    )
    calls = []
    ctl = AdaptiveController(stages, 1.0, lambda s, n, why: calls.append((s, n, why)) or n, controlled=SCALABLE)
    assert set(ctl.stages) == {"rollout", "propose", "evaluate", "validate", "reflect"}
    deltas = ctl.step()
    assert deltas == {"rollout": 1, "propose": 1, "validate": -1, "reflect": -1}
    assert calls == [
        ("propose", 3, "rate 0.100/s below half the median 1.000/s"),
        ("reflect", 2, "rate 5.000/s above twice the median 1.000/s"),
    ]
    assert ctl.decisions == 2


def test_controller_never_leaves_bounds_over_many_steps() -> None:
    stages = light_stages(rollout=(0.1, 2, 2, 5), propose=(1.0, 3, 1, 8), evaluate=(9.0, 4, 2, 8))

    def resize(stage, n, _why):
        stages[stage].target_workers = n
        return n

    ctl = AdaptiveController(stages, 1.0, resize)
    for _ in range(10):
        ctl.step()
        for s in stages.values():
            assert s.min_workers <= s.target_workers <= s.max_workers
    assert stages["rollout"].target_workers == 5 and stages["evaluate"].target_workers == 2
    assert ctl.decisions == 3 + 2


async def test_controller_run_sleeps_the_interval_between_steps() -> None:
    stages = light_stages(rollout=(0.1, 1, 1, 8), propose=(1.0, 1, 1, 8), evaluate=(1.0, 1, 1, 8))
    sleeps, sizes = [], []

    async def fake_sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) > 3:
            raise asyncio.CancelledError

    def resize(stage, n, _why):
        stages[stage].target_workers = n
        sizes.append((stage, n))
        return n

    ctl = AdaptiveController(stages, 0.25, resize, sleep=fake_sleep)
    with pytest.raises(asyncio.CancelledError):
        await ctl.run()
    assert sleeps == [0.25] * 4
    assert sizes == [("rollout", 2), ("rollout", 3), ("rollout", 4)]  # one worker per step


def set_rates(stages, **marks) -> None:
    """Replace the meters of real stages by frozen ones: `marks` items in the 10 s window."""
    for name, st_ in stages.items():
        meter = RateMeter(clock=lambda: 100.0)
        for _ in range(marks.get(name, 0)):
            meter.mark()
        st_.meter = meter


async def test_orchestrator_resizes_publish_worker_reallocated(harness) -> None:
    fake = harness.fake
    run = await harness.create(
        pipeline={"mode": "async", "max_in_flight": 1, "min_workers": {"propose": 2, "reflect": 2},
                  "max_workers": {"rollout": 9}},
        budget={"max_proposals": 1},
    )
    events = run.bus.subscribe()
    orch = run.orchestrator
    hold = fake.hold(is_item("rollout", "i000001"))
    task = harness.start(run)
    await until(lambda: len(hold.arrived) == 3, what="item 1 held at rollout")
    assert (orch.stages["rollout"].target_workers, orch.stages["rollout"].max_workers) == (8, 9)

    set_rates(orch.stages, rollout=1, propose=4, evaluate=4, reflect=40)  # 0.1, 0.4, 0.4, 4.0 /s
    ctl = AdaptiveController(orch.stages, 1.0, orch.set_workers, controlled=orch.spec.scalable)
    for _ in range(4):
        ctl.step()
    orch.set_workers("propose", 3)                   # by the user
    orch.set_workers("propose", 3)                   # no change: no event
    assert orch.set_workers("propose", 0) == 2       # clamped to its min
    with pytest.raises(ValueError, match="unknown stage 'nope'"):
        orch.set_workers("nope", 2)

    moves = [(e.stage, e.old, e.new, e.reason) for e in events.drain() if e.kind == "worker_reallocated"]
    assert moves == [
        ("rollout", 8, 9, "rate 0.100/s below half the median 0.400/s"),
        ("reflect", 4, 3, "rate 4.000/s above twice the median 0.400/s"),
        ("reflect", 3, 2, "rate 4.000/s above twice the median 0.400/s"),  # then rollout at max, reflect at min
        ("propose", 8, 3, "user"),
        ("propose", 3, 2, "user"),
    ]
    assert ctl.decisions == 3
    assert orch.stages["rollout"].workers == 9
    hold.release()
    assert (await harness.finish(task)).status == "completed"


async def test_adaptive_config_runs_the_controller_only_in_async_mode(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "adaptive": True, "control_interval_s": 0.002,
                                         "max_in_flight": 4}, budget={"max_proposals": 8})
    events = run.bus.subscribe()
    result = await harness.run_to_end(run)
    assert result.status == "completed"
    assert run.orchestrator.controller is not None
    for e in (e for e in events.drain() if e.kind == "worker_reallocated"):
        st_ = run.orchestrator.stages[e.stage]
        assert e.old != e.new and abs(e.old - e.new) == 1
        assert st_.min_workers <= e.new <= st_.max_workers
        assert "the median" in e.reason

    sync_run = await harness.create(pipeline={"mode": "sync", "adaptive": True, "control_interval_s": 0.002},
                                    budget={"max_proposals": 1})
    assert (await harness.run_to_end(sync_run)).status == "completed"
    assert sync_run.orchestrator.controller is None


# == 2. validation order and config ================================================================


def test_k_consecutive_passes_move_an_example_to_the_end() -> None:
    vo = ValidationOrder(["a", "b", "c", "d"], k=2)
    assert vo.record({"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0}) == []
    assert vo.order == ["a", "b", "c", "d"]
    assert vo.record({"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}) == ["a", "d"]
    assert vo.order == ["b", "c", "a", "d"]
    assert vo.streak == {"a": 2, "b": 0, "c": 1, "d": 2}
    # c reaches k; a and d go past k and do not move again
    assert vo.record({ex: 1.0 for ex in "abcd"}) == ["c"]
    assert vo.order == ["b", "a", "d", "c"]


def test_a_failure_resets_the_streak() -> None:
    vo = ValidationOrder(["a", "b"], k=2)
    vo.record({"a": 1.0})
    vo.record({"a": 0.5})  # below pass_score 1.0
    assert vo.streak["a"] == 0
    assert vo.record({"a": 1.0}) == [] and vo.order == ["a", "b"]
    assert vo.record({"a": 1.0}) == ["a"] and vo.order == ["b", "a"]
    # an example missing from the scores keeps its streak
    vo2 = ValidationOrder(["a", "b"], k=2)
    vo2.record({"a": 1.0})
    vo2.record({"b": 0.0})
    assert vo2.streak["a"] == 1


def test_pass_score_is_inclusive() -> None:
    vo = ValidationOrder(["a", "b"], k=1, pass_score=0.9)
    assert vo.record({"a": 0.9, "b": 0.89}) == ["a"]
    assert vo.order == ["b", "a"]


@pytest.mark.parametrize("n, alpha, size", [
    (4, 0.5, 2), (4, 0.3, 2), (4, 1.0, 4), (4, 0.01, 1), (10, 0.3, 3), (3, 0.5, 2), (1, 0.5, 1),
    (5, 0.2, 1), (5, 0.21, 2), (7, 0.999, 7),
])
def test_prefix_size(n, alpha, size) -> None:
    assert ValidationOrder([f"e{i}" for i in range(n)], k=1).prefix_size(alpha) == size


@given(st.integers(1, 200), st.floats(min_value=1e-6, max_value=1.0, allow_nan=False))
def test_prefix_size_bounds(n, alpha) -> None:
    size = ValidationOrder([f"e{i}" for i in range(n)], k=1).prefix_size(alpha)
    assert 1 <= size <= n
    # ceil(alpha * n), tolerant of float noise just above an integer
    assert math.ceil(alpha * n - 1e-3) <= size <= max(1, math.ceil(alpha * n))


def test_state_restore_round_trip_through_json() -> None:
    ids = ["a", "b", "c", "d", "e"]
    vo = ValidationOrder(ids, k=2)
    for scores in ({"a": 1, "b": 1, "c": 0}, {"a": 1, "b": 0, "d": 1}, {"d": 1, "e": 1}):
        vo.record(scores)
    saved = json.loads(json.dumps(vo.state()))
    back = ValidationOrder(ids, k=2)
    back.restore(saved)
    assert back.order == vo.order == ["b", "c", "e", "a", "d"]
    assert back.streak == vo.streak
    nxt = {"b": 1, "c": 1, "e": 1}
    assert back.record(nxt) == vo.record(nxt)
    assert back.order == vo.order


def test_restore_ignores_an_order_of_other_examples() -> None:
    vo = ValidationOrder(["a", "b", "c"], k=2)
    vo.restore({"order": ["c", "b", "x"], "streak": {"a": 1, "x": 7}})
    assert vo.order == ["a", "b", "c"]
    assert vo.streak == {"a": 1, "b": 0, "c": 0}
    vo.restore({"order": ["c", "a", "b"]})
    assert vo.order == ["c", "a", "b"]


@pytest.mark.parametrize("k", [0, -1])
def test_reorder_k_below_one_is_rejected(k) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ValidationOrder(["a"], k=k)


@pytest.mark.parametrize("pipeline, expected", [
    ({"spec_alpha": 0}, "'pipeline.spec_alpha': Input should be greater than 0"),
    ({"spec_alpha": -0.5}, "'pipeline.spec_alpha': Input should be greater than 0"),
    ({"spec_alpha": 1.01}, "'pipeline.spec_alpha': Input should be less than or equal to 1"),
    ({"reorder_k": 0}, "'pipeline.reorder_k': Input should be greater than or equal to 1"),
    ({"min_workers": {"rollout": 5}, "max_workers": {"rollout": 2}},
     "stage 'rollout': min_workers 5 must be >= 1 and <= max_workers 2"),
    ({"min_workers": {"rollout": 80}}, "stage 'rollout': min_workers 80 must be >= 1 and <= max_workers 64"),
    ({"min_workers": {"rollout": 0}}, "min_workers 0 must be >= 1"),
])
def test_config_errors_name_the_key(pipeline, expected) -> None:
    with pytest.raises(ConfigError) as info:
        build_config([("defaults", {}), ("run.toml", {"pipeline": pipeline})])
    msg = str(info.value)
    assert msg.startswith("run.toml: ")
    assert expected in msg


def test_config_accepts_the_boundaries() -> None:
    cfg = build_config([("run.toml", {"pipeline": {"spec_alpha": 1.0, "reorder_k": 1,
                                                    "min_workers": {"reflect": 3}, "max_workers": {"reflect": 3}}})])
    assert cfg.pipeline.spec_alpha == 1.0 and cfg.pipeline.reorder_k == 1
    assert build_config([]).pipeline.spec_alpha == 0.3


# == 3. reflective policy ===========================================================================


def test_reflective_policy_reflects_stale_items_where_a_proposal_exists() -> None:
    policy = ReflectivePolicy(max_gap=2)
    assert policy.decide(0, True).action == "pass" and policy.decide(0, True).reason == "fresh"
    assert policy.decide(2, True).action == "pass"  # inclusive threshold
    d = policy.decide(3, reflectable=True)
    assert d.action == "reflect" and "gap 3 > 2" in d.reason


def test_reflective_policy_passes_stale_items_without_a_proposal() -> None:
    d = ReflectivePolicy(max_gap=0).decide(5, reflectable=False)
    assert d.action == "pass" and d.reason == "gap 5: no proposal to reflect on yet"


def test_make_policy_builds_reflective() -> None:
    p = make_policy("reflective", 3)
    assert isinstance(p, ReflectivePolicy) and p.name == "reflective" and p.max_gap == 3


# == 4. parse_verdict ===============================================================================


@pytest.mark.parametrize("reply, expected", [
    ("VERDICT: keep\nREASON: still useful", ("keep", "still useful", None)),
    ("VERDICT: discard\nREASON: redundant", ("discard", "redundant", None)),
    ("Thinking...\nverdict: Discard", ("discard", "", None)),
    ("VERDICT: patch\nREASON: rebase\n```\nline one\nline two\n```", ("patch", "rebase", "line one\nline two")),
    # the patched text is the last complete block after the VERDICT line
    ("```\nold\n```\nVERDICT: patch\n```text\nfirst\n```\n```\nsecond\n```", ("patch", "", "second")),
    # markdown emphasis around the verdict word is tolerated
    ("VERDICT: **patch**\nREASON: x\n```\nP\n```", ("patch", "x", "P")),
    ("**VERDICT:** keep", ("keep", "", None)),
    ("VERDICT: patch\nREASON: no block", ("malformed", "patch verdict without a complete ``` block", None)),
    ("```\nP\n```\nVERDICT: patch", ("malformed", "patch verdict without a complete ``` block", None)),
    ("VERDICT: patch\n```\nunterminated", ("malformed", "patch verdict without a complete ``` block", None)),
    ("VERDICT: patch\n```\n   \n```", ("malformed", "patch verdict without a complete ``` block", None)),
    ("I would keep it.", ("malformed", "no VERDICT line", None)),
    ("VERDICT: keeping it", ("malformed", "no VERDICT line", None)),
    ("VERDICT: maybe", ("malformed", "no VERDICT line", None)),
    ("", ("malformed", "no VERDICT line", None)),
])
def test_parse_verdict(reply, expected) -> None:
    assert parse_verdict(reply) == expected


# == 5. the simulated judge =========================================================================


class FixedRandom(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


SEED_RULES = "Format the list on one line."
R0, R1 = RULES[0], RULES[1]


def reflect_request(best: str, child: str, parent: str = SEED_RULES) -> str:
    changes = [(2, "a000001", 0.5, parent, best)]
    return build_reflect_messages(best, parent, child, 1, 2, changes)[1]["content"]


BEST = f"{SEED_RULES}\n{R0.statement}"


@pytest.mark.parametrize("child, reason", [
    (f"{SEED_RULES}\n{R0.statement}", "redundant: the current best already states it"),
    (f"{SEED_RULES}\n{R0.paraphrases[0]}", "redundant: the current best already states it"),
    (f"{SEED_RULES}\n{R0.wrong}", "conflicts with a rule the current best already states"),
    (f"{SEED_RULES}\nBe concise and helpful.", "too specific: no transferable rule"),
])
def test_judge_discards_redundant_conflicting_and_vague(child, reason) -> None:
    answer = stale_model.judge(reflect_request(BEST, child), FixedRandom(0.99))
    assert answer == f"VERDICT: discard\nREASON: {reason}"
    assert parse_verdict(answer) == ("discard", reason, None)


def test_judge_patches_a_new_rule_onto_the_best() -> None:
    child = f"{SEED_RULES}\n{R1.statement}"
    answer = stale_model.judge(reflect_request(BEST, child), FixedRandom(stale_model.P_MISJUDGE))
    verdict, reason, patched = parse_verdict(answer)
    assert (verdict, reason) == ("patch", "adds 1 rule(s) the current best lacks")
    assert patched == f"{BEST}\n{R1.statement}"
    # a new rule next to a redundant one: only the new line is added
    child2 = f"{SEED_RULES}\n{R0.statement}\n{R1.statement}"
    assert parse_verdict(stale_model.judge(reflect_request(BEST, child2), FixedRandom(0.5)))[2] == patched


def test_judge_with_a_seeded_rng_and_no_misjudgement(monkeypatch) -> None:
    monkeypatch.setattr(stale_model, "P_MISJUDGE", 0.0)
    child = f"{SEED_RULES}\n{R1.statement}"
    for seed in range(5):
        assert parse_verdict(stale_model.judge(reflect_request(BEST, child), random.Random(seed)))[0] == "patch"


def test_judge_misjudges_below_p_misjudge() -> None:
    low = FixedRandom(stale_model.P_MISJUDGE / 2)
    new_rule = stale_model.judge(reflect_request(BEST, f"{SEED_RULES}\n{R1.statement}"), low)
    assert new_rule.startswith("VERDICT: discard\nREASON: (misjudged) adds 1 rule")
    redundant = stale_model.judge(reflect_request(BEST, f"{SEED_RULES}\n{R0.statement}"), low)
    assert redundant.startswith("VERDICT: keep\nREASON: (misjudged) redundant")


def test_judge_ignores_requests_that_are_not_stale_checks() -> None:
    assert stale_model.judge("## Current instructions\n```\nx\n```", FixedRandom(0.9)) is None
    assert stale_model.judge("## Stale proposal\n## Current best instructions\nno blocks", FixedRandom(0.9)) is None


# == 6. reflective async end to end =================================================================


async def test_reflective_async_routes_stale_proposals_through_reflect(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "policy": "reflective", "max_gap": 0, "max_in_flight": 6},
                               budget={"max_proposals": 6})
    events = run.bus.subscribe()
    fake.verdicts = {"i000002": "patch", "i000003": "discard", "i000004": "malformed", "i000005": "length",
                     "i000006": "keep"}

    def override(req):
        if req.stage != "propose":
            return None
        if req.item_id == "i000001":  # passes its minibatch, and scores on val (omega): the new best
            return fenced(req.current(), *kw_lines(req.keywords()[0], "omega"))
        if req.item_id == "i000002":  # every keyword of its minibatch
            return fenced(req.current(), *kw_lines(*req.keywords()))
        return None

    fake.override = override
    hold_eval_1 = fake.hold(is_item("evaluate", "i000001"))
    hold_propose = fake.hold(lambda r: r.stage == "propose" and r.item_id in ("i000002", "i000003", "i000004", "i000005"))
    hold_rollout_6 = fake.hold(is_item("rollout", "i000006"))
    task = harness.start(run)
    await until(lambda: len(hold_eval_1.arrived) == 3 and len(hold_propose.arrived) == 4
                and len(hold_rollout_6.arrived) == 3, what="items held")
    hold_eval_1.release()
    await until(lambda: run.ctx.pool.version == 2, what="item 1 committed")
    a1 = run.ctx.pool.get("a000001")
    assert run.ctx.pool.best() is a1
    hold_propose.release()
    hold_rollout_6.release()
    result = await harness.finish(task)
    assert result.status == "completed"

    rid = run.ctx.run_id
    rows = await harness.rows("staleness", rid)
    by = {(r["item_id"], r["stage"], r["decision"]): r for r in rows}
    stale = ["i000002", "i000003", "i000004", "i000005", "i000006"]
    for iid in stale:
        r = by[(iid, "evaluate", "reflect")]
        assert (r["gap"], r["item_version"], r["policy"]) == (r["pool_version"] - 1, 1, "reflective")
        assert r["gap"] >= 1
    # item 6 was rolled out while item 1 committed: stale at propose, where the policy passes it
    r6 = by[("i000006", "propose", "pass")]
    assert r6["gap"] >= 1 and r6["reason"].endswith("no proposal to reflect on yet")

    verdicts = {r["item_id"]: r for r in rows if r["stage"] == "reflect"}
    assert {i: r["decision"] for i, r in verdicts.items()} == {
        "i000002": "patch", "i000003": "discard", "i000004": "malformed", "i000005": "malformed", "i000006": "keep"}
    for r in verdicts.values():
        assert r["tokens"] == 15 and r["policy"] == "reflective"  # the one reflect call of the item
        assert r["detail"]["best"] == "a000001" and r["detail"]["changes"] >= 1
    assert verdicts["i000004"]["reason"] == "no VERDICT line"
    assert verdicts["i000005"]["reason"] == "reflection cut by max_tokens"
    assert verdicts["i000003"]["reason"] == "scripted discard"
    # reflected items pass evaluate without a second check against the policy
    for iid in ("i000002", "i000006"):
        assert by[(iid, "evaluate", "pass")]["reason"].startswith("reflected at v")
    assert not any(("i" + n, "evaluate", "pass") in by for n in ("000003", "000004", "000005"))

    record = await harness.record(rid)
    arts = {a["artifact_id"]: a for a in record.artifacts}
    outcomes = {i["item_id"]: i["outcome"] for i in await harness.rows("items", rid)}
    for iid in ("i000003", "i000004", "i000005"):
        assert outcomes[iid] == "discarded_reflect"
        assert "a" + iid[1:] not in arts and "a" + iid[1:] not in run.ctx.pool
    assert outcomes["i000001"] == outcomes["i000002"] == outcomes["i000006"] == "accepted"
    assert record.open_items == []

    # the patched item was rebased onto the best at reflection time and gated against it
    a2 = arts["a000002"]
    assert a2["parent_ids"] == [verdicts["i000002"]["detail"]["best"]] == ["a000001"]
    assert a2["meta"]["rebased"] == {"from_parent": "a000000", "from_version": 1,
                                     "to_version": verdicts["i000002"]["pool_version"]}
    assert a2["text"].startswith(a1.text + "\n") and a2["text"] != a1.text
    evals_2 = fake.of("evaluate", "i000002")
    assert sum(1 for r in evals_2 if r.system == a1.text) == 3  # the new parent on the minibatch
    assert sum(1 for r in evals_2 if r.system == a2["text"]) == 3 + len(VAL_KEYWORDS)
    assert not any(r.system == run.ctx.pool.get("a000000").text for r in evals_2)
    # kept: evaluated against its own (old) parent, no re-run of it, no rebase
    a6 = arts["a000006"]
    assert a6["parent_ids"] == ["a000000"] and "rebased" not in a6["meta"]
    assert all(r.system == a6["text"] for r in fake.of("evaluate", "i000006"))

    calls = await harness.rows("llm_calls", rid)
    assert sorted(c["item_id"] for c in calls if c["stage"] == "reflect") == stale
    to_reflect = [s for s in await harness.rows("item_stages", rid) if s["outcome"] == "to_reflect"]
    assert sorted(s["item_id"] for s in to_reflect) == stale and {s["stage"] for s in to_reflect} == {"evaluate"}

    wasted = {e.item_id: e.wasted_tokens for e in events.drain() if e.kind == "stale_discarded"}
    assert wasted == {iid: 5 * 15 for iid in ("i000003", "i000004", "i000005")}  # 3 rollout + propose + reflect
    assert result.summary["discarded_stale"] == 3
    snap = run.snapshot().staleness
    assert snap["reflect"] == 5
    assert (snap["reflect_patch"], snap["reflect_keep"], snap["reflect_discard"], snap["reflect_malformed"]) == (1, 1, 1, 2)


async def test_a_patch_equal_to_the_best_is_discarded(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "policy": "reflective", "max_gap": 0, "max_in_flight": 2},
                               budget={"max_proposals": 2})
    fake.verdicts = {"i000002": "patch"}
    # item 2 proposes exactly what item 1 commits: the patch adds nothing to the best
    fake.override = lambda req: (fenced(req.current(), "KEYWORD-alpha", "KEYWORD-beta", "KEYWORD-gamma",
                                        "KEYWORD-delta", "KEYWORD-epsilon", "KEYWORD-zeta")
                                 if req.stage == "propose" else None)
    hold_eval_1 = fake.hold(is_item("evaluate", "i000001"))
    hold_prop_2 = fake.hold(is_item("propose", "i000002"))
    task = harness.start(run)
    await until(lambda: hold_eval_1.arrived and hold_prop_2.arrived)
    hold_eval_1.release()
    await until(lambda: run.ctx.pool.version == 2)
    hold_prop_2.release()
    assert (await harness.finish(task)).status == "completed"
    rows = [r for r in await harness.rows("staleness", run.ctx.run_id) if r["stage"] == "reflect"]
    assert [(r["item_id"], r["decision"], r["reason"]) for r in rows] == [
        ("i000002", "discard", "patch adds nothing to the current best")]
    assert "a000002" not in run.ctx.pool


# == 7. speculative evaluation =======================================================================

SPEC = {"mode": "async", "speculation": True, "spec_alpha": 0.5}


def spec_override(fake, val_keywords: tuple[str, ...], items=("i000001",)):
    """The seed scores 0.9 on omega only (val mean 0.225). A scripted item proposes the seed plus a
    training-only keyword of its minibatch (to pass the gate) plus `val_keywords`; the val order
    is alpha, gamma | epsilon, omega, so with alpha the prefix mean is 0.45."""
    train_only: list[str] = []

    def override(req):
        if req.stage == "evaluate" and req.item_id is None and req.keyword() == "omega":
            return completion("omega")
        if req.stage == "propose" and req.item_id in items:
            extra = [k for k in req.keywords() if k not in VAL_KEYWORDS]
            assert extra, "seed choice: the minibatch needs a training-only keyword"
            train_only.append(extra[0])
            return fenced(req.current(), *kw_lines(extra[0], *val_keywords))
        return None

    fake.override = override
    return train_only


def spec_rest(run, item_id: str = "i000001"):
    """The validation requests after a speculative insert (the prefix is done by then)."""
    return lambda r: r.stage == "evaluate" and r.item_id == item_id and any(
        a.status == "speculative" for a in run.ctx.pool.artifacts())


@pytest.mark.parametrize("val_keywords, status", [(("alpha", "epsilon"), "confirmed"), (("alpha",), "removed")])
async def test_speculative_insert_then_confirm_or_remove(harness, val_keywords, status) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={**SPEC, "max_in_flight": 1}, budget={"max_proposals": 1})
    spec_override(fake, val_keywords)
    events = run.bus.subscribe()
    hold = fake.hold(spec_rest(run))
    task = harness.start(run)
    await until(lambda: len(hold.arrived) == 2, what="the speculative insert")
    pool = run.ctx.pool
    assert run.ctx.val_order.prefix_size(0.5) == 2
    art = pool.get("a000001")
    assert art.status == "speculative" and dict(art.val_scores) == {"v0": 0.9, "v1": 0.0}
    assert art.parent_ids == ("a000000",) and art.meta["partial"] == 0.45 and art.meta["threshold"] == 0.225
    assert art in pool.live() and art not in pool.confirmed()
    assert pool.best().artifact_id == "a000000"
    await run.ctx.store.flush()
    assert [a["status"] for a in await harness.rows("artifacts", run.ctx.run_id)] == ["seed", "speculative"]
    hold.release()
    result = await harness.finish(task)
    assert result.status == "completed"

    record = await harness.record(run.ctx.run_id)
    ev = [(e["version"], e["kind"], e["artifact_id"], e["detail"]) for e in record.pool_events]
    full_mean = 0.225 * (1 + len(val_keywords) - 1)
    assert ev[0][:3] == (1, "add", "a000000")
    assert ev[1] == (2, "add", "a000001", {"speculative": True, "partial": 0.45, "threshold": 0.225})
    assert ev[2][:3] == (3, status, "a000001")
    assert ev[2][3]["val_mean"] == pytest.approx(full_mean) and ev[2][3]["threshold"] == 0.225
    assert len(ev) == 3 and pool.version == 3
    stored = {a["artifact_id"]: a for a in record.artifacts}["a000001"]
    assert stored["status"] == status == pool.get("a000001").status
    tally = run.ctx.tally
    assert tally.speculative_inserted == 1
    outcome = {i["item_id"]: i["outcome"] for i in await harness.rows("items", run.ctx.run_id)}["i000001"]
    accepted = [e for e in events.drain() if e.kind == "candidate_accepted"]
    if status == "confirmed":
        assert (tally.speculative_confirmed, tally.speculative_removed) == (1, 0)
        assert stored["val_scores"] == {"v0": 0.9, "v1": 0.0, "v2": 0.9, "v3": 0.0}
        assert pool.best().artifact_id == "a000001"
        assert outcome == "accepted" and [e.artifact_id for e in accepted] == ["a000001"]
    else:
        assert (tally.speculative_confirmed, tally.speculative_removed) == (0, 1)
        assert pool.get("a000001") not in pool.live() and pool.best().artifact_id == "a000000"
        assert outcome == "removed_speculative" and accepted == [] and result.summary["accepted"] == 0
    # speculation makes no extra requests: the same 3 + 4 evaluations
    assert len(fake.of("evaluate", "i000001")) == 3 + len(VAL_KEYWORDS)


async def test_a_prefix_not_beating_the_best_is_not_speculative(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={**SPEC, "max_in_flight": 1}, budget={"max_proposals": 1})
    spec_override(fake, ("epsilon", "omega"))  # prefix alpha, gamma: 0.0 < 0.225; full 0.45
    result = await harness.run_to_end(run)
    assert result.status == "completed"
    record = await harness.record(run.ctx.run_id)
    assert [(e["kind"], e["detail"].get("speculative")) for e in record.pool_events] == [("add", None), ("add", None)]
    assert run.ctx.pool.get("a000001").status == "confirmed" and run.ctx.tally.speculative_inserted == 0


async def speculative_child_scenario(harness, policy: dict):
    """Item 1 becomes speculative (v2) and is later removed (v3); item 2 fails at propose so that
    item 3 is admitted while item 1 is speculative, with item 1 as its parent; item 3 is held at
    rollout across the removal."""
    fake = harness.fake
    run = await harness.create(pipeline={**SPEC, **policy, "max_in_flight": 2}, budget={"max_proposals": 3})
    spec_override(fake, ("alpha",))
    scripted = fake.override
    fake.override = lambda req: (completion("no idea") if (req.stage, req.item_id) == ("propose", "i000002")
                                 else scripted(req))
    handlers = run.orchestrator.handlers
    select = handlers.select

    def select_speculative():
        chosen = select()
        spec = [a.artifact_id for a in run.ctx.pool.live() if a.status == "speculative"]
        return replace(chosen, parent_id=spec[0]) if spec else chosen

    handlers.select = select_speculative
    hold_rest_1 = fake.hold(spec_rest(run))
    hold_prop_2 = fake.hold(is_item("propose", "i000002"))
    hold_roll_3 = fake.hold(is_item("rollout", "i000003"))
    task = harness.start(run)
    await until(lambda: len(hold_rest_1.arrived) == 2 and hold_prop_2.arrived, what="item 1 speculative")
    hold_prop_2.release()
    await until(lambda: len(hold_roll_3.arrived) == 3, what="item 3 rolling out its speculative parent")
    item3 = run.orchestrator.recorder.in_flight["i000003"]
    assert (item3.parent_id, item3.created_version) == ("a000001", 2)
    assert all(r.system == run.ctx.pool.get("a000001").text for r in hold_roll_3.arrived)
    hold_rest_1.release()
    await until(lambda: run.ctx.pool.version == 3, what="item 1 removed")
    return run, task, item3, hold_roll_3


async def test_reflection_patches_onto_a_speculative_leader(harness) -> None:
    """The pool's leader may be a speculative artifact that beats every confirmed one: a stale
    proposal is rebased onto it (the newest promising work), and it is gated against it."""
    fake = harness.fake
    run = await harness.create(pipeline={**SPEC, "policy": "reflective", "max_gap": 0, "max_in_flight": 2},
                               budget={"max_proposals": 2})
    spec_override(fake, ("alpha", "epsilon"))
    scripted = fake.override
    fake.override = lambda req: (fenced(req.current(), *kw_lines(*req.keywords()))
                                 if (req.stage, req.item_id) == ("propose", "i000002") else scripted(req))
    fake.verdicts = {"i000002": "patch"}
    hold_rest_1 = fake.hold(spec_rest(run))
    hold_prop_2 = fake.hold(is_item("propose", "i000002"))
    task = harness.start(run)
    await until(lambda: len(hold_rest_1.arrived) == 2 and hold_prop_2.arrived, what="item 1 speculative")
    pool = run.ctx.pool
    spec = pool.get("a000001")
    assert spec.status == "speculative" and pool.leader() is spec and pool.best().artifact_id == "a000000"
    hold_prop_2.release()
    await until(lambda: fake.of("reflect", "i000002"), what="item 2 reflected")
    hold_rest_1.release()
    assert (await harness.finish(task)).status == "completed"

    rows = [r for r in await harness.rows("staleness", run.ctx.run_id) if r["stage"] == "reflect"]
    assert [(r["item_id"], r["decision"], r["detail"]["best"]) for r in rows] == [("i000002", "patch", "a000001")]
    assert pool.get("a000001").status == "confirmed"
    a2 = pool.get("a000002")
    assert a2.parent_ids == ("a000001",) and a2.text.startswith(spec.text + "\n")
    assert sum(1 for r in fake.of("evaluate", "i000002") if r.system == spec.text) == 3  # gated against it


async def test_removal_rebases_in_flight_children_and_makes_them_stale(harness) -> None:
    run, task, item3, hold_roll_3 = await speculative_child_scenario(harness, {"policy": "guarded", "max_gap": 0})
    pool = run.ctx.pool
    assert pool.get("a000001").status == "removed"
    assert item3.parent_id == "a000000"  # the removed artifact's parent
    assert item3.parent_removed == "a000001"
    assert item3.created_version == 1 and pool.gap(item3.created_version) == 2
    hold_roll_3.release()
    result = await harness.finish(task)
    assert result.status == "completed"

    rid = run.ctx.run_id
    rows = [r for r in await harness.rows("staleness", rid) if r["item_id"] == "i000003"]
    assert [(r["stage"], r["decision"], r["gap"], r["item_version"], r["pool_version"]) for r in rows] == [
        ("propose", "discard", 2, 1, 3)]
    item_rows = {i["item_id"]: i for i in await harness.rows("items", rid)}
    row3 = item_rows["i000003"]
    assert row3["outcome"] == "discarded_stale"
    assert row3["parent_artifact_id"] == "a000000" and row3["payload"]["parent_removed"] == "a000001"
    assert harness.fake.of("propose", "i000003") == []
    assert item_rows["i000001"]["outcome"] == "removed_speculative"


async def test_parent_removed_during_rollout_is_regated_against_the_grandparent(harness) -> None:
    run, task, item3, hold_roll_3 = await speculative_child_scenario(harness, {"policy": "full"})
    hold_roll_3.release()
    assert (await harness.finish(task)).status == "completed"
    seed_text = run.ctx.pool.get("a000000").text
    assert harness.fake.of("propose", "i000003"), "item 3 reached evaluate"
    # Its minibatch scores came from the removed artifact's text: the gate must use the seed's.
    assert sum(1 for r in harness.fake.of("evaluate", "i000003") if r.system == seed_text) == 3


async def test_rejecting_a_speculative_candidate_at_commit_removes_it(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={**SPEC, "max_in_flight": 1, "review_before_commit": True},
                               budget={"max_proposals": 1})
    spec_override(fake, ("alpha", "epsilon"))
    task = harness.start(run)
    await until(lambda: run.review.pending_count == 1, what="candidate parked before commit")
    assert run.ctx.pool.get("a000001").status == "speculative"
    run.review.decide("i000001", "reject", reason="not this one")
    assert (await harness.finish(task)).status == "completed"
    art = run.ctx.pool.get("a000001")
    assert art.status == "removed" and art not in run.ctx.pool.live()


# == 8. pool invariants (property) ===================================================================

SCORES = st.dictionaries(st.sampled_from(["v0", "v1", "v2", "v3"]), st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]),
                         min_size=1)
OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["confirmed", "speculative"]), SCORES, st.integers(0, 50)),
    st.tuples(st.just("settle"), st.sampled_from(["confirmed", "removed"]), SCORES, st.integers(0, 50)),
), max_size=30)


@settings(max_examples=80, deadline=None)
@given(OPS)
def test_pool_never_ranks_unconfirmed_artifacts(ops) -> None:
    pool = Pool()
    pool.add(Artifact("s", "seed", (), 0, {"v0": 0.0}, status="seed"))
    n = 0
    for op, status, scores, pick in ops:
        before = pool.version
        if op == "add":
            parent = pool.artifacts()[pick % len(pool)].artifact_id
            n += 1
            change = pool.add(Artifact(f"x{n}", f"text {n}", (parent,), 0, scores, status=status))
            assert (change.kind, pool.get(f"x{n}").created_version) == ("add", pool.version)
        else:
            specs = [a.artifact_id for a in pool.artifacts() if a.status == "speculative"]
            if not specs:
                continue
            target = specs[pick % len(specs)]
            change = pool.set_status(target, status, scores if status == "confirmed" else None)
            assert change.kind == status and pool.get(target).status == status
            if status == "confirmed":
                assert dict(pool.get(target).val_scores) == scores
        assert pool.version == before + 1 == change.version
        confirmed = pool.confirmed()
        assert all(a.status in ("seed", "confirmed") for a in confirmed)
        assert {a.artifact_id for a in confirmed} == {a.artifact_id for a in pool.artifacts()
                                                      if a.status in ("seed", "confirmed")}
        assert all(a.status != "removed" for a in pool.live())
        best = pool.best()
        assert best is not None and best.status in ("seed", "confirmed")
        assert best.val_mean == max(a.val_mean for a in confirmed)
        for v in range(pool.version + 1):
            assert [c.version for c in pool.changes_since(v)] == list(range(v + 1, pool.version + 1))
    assert len(pool.changes_since(0)) == pool.version


# == 9. pxn lockstep ===============================================================================


def spans(timeline, items, stage):
    """(first start index, last end index) of a stage's requests over a set of items."""
    idx = [n for n, (kind, st_, iid, *_) in enumerate(timeline) if st_ == stage and iid in items and kind == "start"]
    ends = [n for n, (kind, st_, iid, *_) in enumerate(timeline) if st_ == stage and iid in items and kind == "end"]
    return (min(idx), max(ends)) if idx else None


async def test_pxn_steps_run_stage_by_stage(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "pxn", "pxn_parents": 2, "pxn_mutations": 2},
                               budget={"max_proposals": 6})
    events = run.bus.subscribe()
    hold = fake.hold(is_item("rollout", "i000001"))
    task = harness.start(run)
    others = {"i000002", "i000003", "i000004"}
    await until(lambda: len(hold.arrived) == 3 and sum(1 for kind, s, iid, *_ in fake.timeline
                                                       if kind == "end" and s == "rollout" and iid in others) == 9,
                what="every rollout of step 1 but item 1's done")
    assert fake.of("propose") == []  # nobody proposes before the slowest rollout of the step
    assert run.orchestrator.in_flight == 4
    hold.release()
    result = await harness.finish(task)
    assert result.status == "completed" and run.orchestrator.admitted == 6
    assert max(r.orch_in_flight for r in fake.requests if r.item_id) <= 4

    steps = [{"i000001", "i000002", "i000003", "i000004"}, {"i000005", "i000006"}]
    assert set(fake.items_seen()) == steps[0] | steps[1]
    tl = fake.timeline
    parents = {e.item_id: e.parent_id for e in events.drain() if e.kind == "candidate_selected"}
    last_of_step1 = max(n for n, (kind, _s, iid, *_) in enumerate(tl) if kind in ("start", "end") and iid in steps[0])
    first_of_step2 = min(n for n, (kind, _s, iid, *_) in enumerate(tl) if kind in ("start", "end") and iid in steps[1])
    assert last_of_step1 < first_of_step2
    for step in steps:
        seen = [s for s in (spans(tl, step, st_) for st_ in ("rollout", "propose", "evaluate")) if s]
        assert len(seen) >= 2
        for (_, end_a), (start_b, _) in zip(seen, seen[1:]):
            assert end_a < start_b
        # P parents x N mutations: the N items of one parent share it
        ids = sorted(step)
        for a, b in zip(ids[::2], ids[1::2]):
            assert parents[a] == parents[b]


async def test_pxn_budget_smaller_than_a_step_still_completes(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "pxn", "pxn_parents": 2, "pxn_mutations": 4},
                               budget={"max_proposals": 3})
    result = await harness.run_to_end(run)
    assert result.status == "completed" and result.reason == "budget exhausted: proposals"
    assert run.orchestrator.admitted == 3 == len(fake.of("propose"))
    assert set(fake.items_seen()) == {"i000001", "i000002", "i000003"}
    roll, prop = spans(fake.timeline, set(fake.items_seen()), "rollout"), spans(fake.timeline, set(fake.items_seen()), "propose")
    assert roll[1] < prop[0]
    assert (await harness.record(run.ctx.run_id)).open_items == []


# == 10. review gates ===============================================================================


async def test_review_before_evaluate_parks_and_decisions_route_items(harness) -> None:
    fake = harness.fake
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3, "review_before_evaluate": True},
                               budget={"max_proposals": 3})
    events = run.bus.subscribe()
    task = harness.start(run)
    await until(lambda: run.review.pending_count == 3, what="three proposals parked")
    snap = run.snapshot()
    assert snap.review_pending == 3 and snap.review_gates["evaluate"] is True and snap.review_gates["update"] is False
    assert fake.of("evaluate") == [r for r in fake.of("evaluate") if r.item_id is None]  # only the seed's
    pending = {p.item_id: p for p in run.review.pending()}
    assert set(pending) == {"i000001", "i000002", "i000003"}
    seed_text = run.ctx.pool.get("a000000").text
    for p in pending.values():
        assert p.gate == "evaluate" and p.parent_id == "a000000" and p.parent_text == seed_text
        assert p.child_text.startswith(seed_text) and p.child_text != seed_text

    edited = "\n".join([seed_text, *kw_lines("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "omega")])
    run.review.decide("i000001", "approve")
    run.review.decide("i000002", "reject", reason="too narrow")
    run.review.decide("i000003", "edit", reason="broader", edited_text="  " + edited + "\n\n")
    assert run.review.pending_count == 0
    result = await harness.finish(task)
    assert result.status == "completed"

    rid = run.ctx.run_id
    outcomes = {i["item_id"]: i for i in await harness.rows("items", rid)}
    assert outcomes["i000002"]["outcome"] == "rejected_by_review" and outcomes["i000002"]["error"] == "too narrow"
    assert fake.of("evaluate", "i000002") == []
    assert fake.of("evaluate", "i000001")
    assert outcomes["i000003"]["outcome"] == "accepted"
    art3 = run.ctx.pool.get("a000003")
    assert art3.text == edited and art3.val_mean == pytest.approx(0.9)
    assert {r.system for r in fake.of("evaluate", "i000003")} == {edited}
    reviews = [(r["item_id"], r["gate"], r["decision"], r["reason"], r["edited"]) for r in await harness.rows("reviews", rid)]
    assert reviews == [("i000001", "evaluate", "approve", None, 0), ("i000002", "evaluate", "reject", "too narrow", 0),
                       ("i000003", "evaluate", "edit", "broader", 1)]
    kinds = [(e.kind, e.item_id) for e in events.drain() if e.kind.startswith("review_")]
    assert sorted(kinds) == sorted([("review_requested", f"i00000{n}") for n in (1, 2, 3)]
                                   + [("review_decided", f"i00000{n}") for n in (1, 2, 3)])
    assert (await harness.record(rid)).open_items == []


async def test_skip_keeps_pending_and_turning_the_gate_off_releases_all(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2, "review_before_evaluate": True},
                               budget={"max_proposals": 2})
    task = harness.start(run)
    review = run.review
    await until(lambda: review.pending_count == 2, what="two proposals parked")
    assert [p.item_id for p in review.pending()] == ["i000001", "i000002"]
    review.decide("i000001", "skip")
    assert [p.item_id for p in review.pending()] == ["i000002", "i000001"] and review.pending_count == 2
    with pytest.raises(ReviewError, match="unknown review decision"):
        review.decide("i000001", "maybe")
    with pytest.raises(ReviewError, match="needs the edited text"):
        review.decide("i000001", "edit", edited_text="   ")
    with pytest.raises(ReviewError, match="not waiting for review"):
        review.decide("i000009", "approve")
    with pytest.raises(ReviewError, match="unknown review gate"):
        review.set_enabled("propose", False)
    assert review.pending_count == 2
    await run.ctx.store.flush()
    assert await harness.rows("reviews", run.ctx.run_id) == []
    assert harness.fake.of("evaluate", "i000001") == []

    review.set_enabled("evaluate", False)
    assert review.pending_count == 0 and run.snapshot().review_gates["evaluate"] is False
    assert (await harness.finish(task)).status == "completed"
    rows = await harness.rows("reviews", run.ctx.run_id)
    assert sorted((r["item_id"], r["decision"], r["reason"]) for r in rows) == [
        ("i000001", "approve", "review gate turned off"), ("i000002", "approve", "review gate turned off")]
    assert harness.fake.of("evaluate", "i000001") and harness.fake.of("evaluate", "i000002")


async def test_drain_with_parked_items_leaves_them_open(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 2, "review_before_evaluate": True})
    task = harness.start(run)
    await until(lambda: run.review.pending_count == 2, what="two proposals parked")
    run.drain()
    result = await harness.finish(task)
    assert result.status == "interrupted" and result.reason == "drain requested"
    record = await harness.record(run.ctx.run_id)
    assert sorted((i["item_id"], i["stage"]) for i in record.open_items) == [("i000001", "evaluate"), ("i000002", "evaluate")]
    assert all("child" in i["payload"] for i in record.open_items)
    assert harness.fake.of("evaluate", "i000001") == []


async def test_edit_at_the_commit_gate_never_commits_unevaluated_text(harness) -> None:
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 1, "review_before_commit": True},
                               budget={"max_proposals": 1})
    task = harness.start(run)
    await until(lambda: run.review.pending_count == 1, what="candidate parked before commit")
    seed_text = run.ctx.pool.get("a000000").text
    edited = "\n".join([seed_text, *kw_lines(*VAL_KEYWORDS)])  # scores 0.9 on every val example
    try:
        run.review.decide("i000001", "edit", edited_text=edited)
    except ReviewError:
        run.review.decide("i000001", "approve")  # refusing edits after evaluation is a valid fix too
        await harness.finish(task)
        return
    assert (await harness.finish(task)).status == "completed"
    art = run.ctx.pool.get("a000001")
    assert art.text == edited
    assert dict(art.val_scores) == {"v0": 0.9, "v1": 0.9, "v2": 0.9, "v3": 0.9}
