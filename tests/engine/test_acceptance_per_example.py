"""Acceptance sees both sides of a gate per example (scores, outputs, feedback); NoExampleWorse,
per-example Pareto dominance, is an acceptance part that needs them."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.run.runner import EngineRun
from engine.strategy.parts import NoExampleWorse, ParentOnly, ParetoSelector
from engine.strategy.protocols import Evidence, Strategy
from engine.strategy.registry import instance_scope

RULE = NoExampleWorse()


def ev(**scores: float) -> Evidence:
    return Evidence(scores)


def test_a_higher_sum_that_loses_an_example_is_refused():
    assert RULE.verdict(ev(a=1.0, b=1.0, c=0.0), ev(a=0.0, b=0.5, c=0.5), tie_passes=False) == \
        "example c got worse: 0.00 < parent 0.50"
    assert RULE.verdict(ev(a=0.0, b=0.0), ev(a=0.5, b=0.5), tie_passes=False) == \
        "example a got worse: 0.00 < parent 0.50 (and 1 more)"


def test_dominance_passes_and_equality_needs_a_merge():
    assert RULE.verdict(ev(a=1.0, b=0.5), ev(a=0.5, b=0.5), tie_passes=False) is None
    assert RULE.verdict(ev(a=0.5, b=0.5), ev(a=0.5, b=0.5), tie_passes=False) == "no example better than the parent's (2 equal)"
    assert RULE.verdict(ev(a=0.5, b=0.5), ev(a=0.5, b=0.5), tie_passes=True) is None
    assert RULE.verdict(ev(a=1.0), ev(b=0.0), tie_passes=False) == "no example scored on both sides"


def test_evidence_from_traces_keeps_outputs_and_feedback():
    side = Evidence.of_traces([{"example_id": "e1", "score": 1, "output": "yes", "feedback": ""},
                               {"example_id": "e2", "score": 0.5, "output": "no", "feedback": "missed rule r3"}])
    assert side.scores == {"e1": 1.0, "e2": 0.5} and side.total == 1.5
    assert side.outputs == {"e1": "yes", "e2": "no"} and side.feedback == {"e2": "missed rule r3"}


@dataclass
class Recorded:
    """NoExampleWorse, keeping what each gate showed it."""

    seen: list = field(default_factory=list)
    name: str = "no example worse (recorded)"
    gated: bool = True

    def verdict(self, child: Evidence, parent: Evidence, *, tie_passes: bool) -> str | None:
        out = RULE.verdict(child, parent, tie_passes=tie_passes)
        self.seen.append((child, parent, out))
        return out


async def test_a_prompt_run_gates_on_per_example_evidence(tmp_path):
    acceptance = Recorded()
    strategy = Strategy(name="dominance", summary="gepa with per-example dominance", selector=ParetoSelector(),
                        context=ParentOnly(), acceptance=acceptance, merges=False)
    layer = {"strategy": {"name": "dominance"}, "pipeline": {"mode": "async", "minibatch_size": 3},
             "sim": {"time_scale": 2000}, "budget": {"max_proposals": 8}}
    with instance_scope(strategy):
        run = await EngineRun.create("rules", [("test", layer)], tmp_path / "r.db")
        result = await run.run()
    assert result.status == "completed" and result.summary["strategy"] == "dominance"
    assert acceptance.seen
    for child, parent, out in acceptance.seen:
        assert len(child.scores) == 3 and set(child.scores) == set(parent.scores)
        assert set(child.outputs) == set(child.scores) and set(parent.outputs) == set(parent.scores)
        assert (out is None) == (all(child.scores[e] >= parent.scores[e] for e in child.scores)
                                 and any(child.scores[e] > parent.scores[e] for e in child.scores))
    # The rules task's metric says what an answer missed: some side of some gate carries it.
    assert any(c.feedback or p.feedback for c, p, _ in acceptance.seen)
    refused = [out for _, _, out in acceptance.seen if out is not None]
    assert result.summary["rejected"] >= len(refused)
