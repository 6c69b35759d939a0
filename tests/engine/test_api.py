"""evotui.optimize: a GEPA-style adapter on the simulated backend (issue 15 item 5)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from dataclasses import dataclass, field

import pytest

import evotui
from evotui.cli import main as cli_main

from engine.tasks.ruleworld import RULES, prompt_status

# The simulated reflection model is the rule world's reflector (engine/tasks/ruleworld_sim.py):
# it adds the rules that feedback lines state. The "keywords" are those rules: an example
# requires two, the component must state them (as the rule world reads a prompt).
KEYWORDS = tuple(rule.id for rule in RULES[:6])
STATEMENT = {rule.id: rule.statement for rule in RULES}


@dataclass
class Batch:
    outputs: list
    scores: list
    trajectories: list | None = None


@dataclass
class KeywordAdapter:
    """Score: the fraction of an example's required keywords that the "instructions" component
    mentions; trajectories: which were missing."""

    calls: list = field(default_factory=list)

    def evaluate(self, batch, candidate, capture_traces=False):
        self.calls.append(len(batch))
        status = prompt_status(candidate["instructions"])
        scores, outputs, trajectories = [], [], []
        for example in batch:
            missing = [k for k in example["required"] if status[k] != "right"]
            scores.append(1 - len(missing) / len(example["required"]))
            outputs.append({"mentioned": len(example["required"]) - len(missing)})
            trajectories.append({"example": example, "missing": missing})
        return Batch(outputs, scores, trajectories if capture_traces else None)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        records = [{"Inputs": t["example"]["question"], "Generated Outputs": candidate["style"],
                    "Feedback": " ".join(STATEMENT[k] for k in t["missing"]) or "all rules stated"}
                   for t in eval_batch.trajectories]
        return {name: records for name in components_to_update}


def _data(n: int, offset: int) -> list[dict]:
    return [{"question": f"q{offset + i}", "required": [KEYWORDS[(offset + i) % 6], KEYWORDS[(offset + i + 2) % 6]]}
            for i in range(n)]


SEED = {"instructions": "Answer the question.", "style": "Be friendly."}


def _optimize(tmp_path, adapter=None, **kw):
    options = dict(reflection_llm="sim", max_metric_calls=150, db=tmp_path / "api.db", seed=0,
                   config={"sim": {"time_scale": 1000}})
    options.update(kw)
    return evotui.optimize(SEED, _data(6, 0), _data(4, 10), adapter or KeywordAdapter(), **options)


def test_optimize_returns_a_gepa_shaped_result_that_improves(tmp_path):
    res = _optimize(tmp_path)
    n = len(res.candidates)
    assert n >= 2
    assert res.candidates[0] == SEED and res.parents[0] == [None]
    assert all(set(c) == set(SEED) for c in res.candidates)
    assert len(res.parents) == len(res.val_aggregate_scores) == len(res.val_subscores) == n
    assert all(len(s) == 4 for s in res.val_subscores)
    assert all(p is not None and p < i for i, ps in enumerate(res.parents[1:], 1) for p in ps)
    assert res.val_aggregate_scores[0] == 0.0
    assert res.val_aggregate_scores[res.best_idx] > res.val_aggregate_scores[0]
    assert res.best_candidate == res.candidates[res.best_idx]
    assert res.total_metric_calls >= 4
    assert res.status == "completed"


def test_a_python_run_is_visible_with_evotui_show(tmp_path, capsys):
    res = _optimize(tmp_path, max_metric_calls=40)
    capsys.readouterr()
    assert cli_main(["show", res.run_id, "--db", str(tmp_path / "api.db")]) == 0
    out = capsys.readouterr().out
    assert res.run_id in out
    with sqlite3.connect(tmp_path / "api.db") as con:
        status, task_path = con.execute("select status, task_path from runs where run_id = ?", (res.run_id,)).fetchone()
    assert status == "completed" and task_path.startswith("python:")
    assert cli_main(["resume", res.run_id, "--no-ui", "--db", str(tmp_path / "api.db")]) == 2
    assert "not resumable from the CLI" in capsys.readouterr().err


class OwnProposer(KeywordAdapter):
    """GEPA's optional propose_new_texts replaces the reflection LLM."""

    def propose_new_texts(self, candidate, reflective_dataset, components_to_update):
        return {name: candidate[name] + "\n" + STATEMENT[KEYWORDS[len(candidate[name]) % 6]]
                for name in components_to_update}


def test_the_adapter_s_own_proposer_replaces_the_reflection_llm(tmp_path):
    res = _optimize(tmp_path, adapter=OwnProposer(), max_metric_calls=80)
    assert len(res.candidates) >= 2
    changed = [c for c in res.candidates[1:] if c != SEED]
    assert changed and all(any(s in c["instructions"] + c["style"] for s in STATEMENT.values()) for c in changed)
    with sqlite3.connect(tmp_path / "api.db") as con:
        summary = json.loads(con.execute("select summary_json from runs").fetchone()[0])
    assert summary["llm_calls"] == 0 and summary["proposals"] >= 1


class NoReflect:
    def evaluate(self, batch, candidate, capture_traces=False):
        return Batch([0] * len(batch), [0.0] * len(batch), [None] * len(batch))


@pytest.mark.parametrize("seed, train, val, adapter, reason", [
    ({}, _data(2, 0), _data(2, 0), KeywordAdapter(), "non-empty dict"),
    ({"instructions": 3}, _data(2, 0), _data(2, 0), KeywordAdapter(), "must be strings"),
    (SEED, [], _data(2, 0), KeywordAdapter(), "trainset"),
    (SEED, _data(2, 0), [], KeywordAdapter(), "valset"),
    (SEED, _data(2, 0), _data(2, 0), NoReflect(), "make_reflective_dataset"),
    (SEED, _data(2, 0), _data(2, 0), object(), "evaluate"),
])
def test_bad_input_raises_value_error(tmp_path, seed, train, val, adapter, reason):
    with pytest.raises(ValueError, match=reason):
        evotui.optimize(seed, train, val, adapter, db=tmp_path / "bad.db", max_metric_calls=10)
    assert not (tmp_path / "bad.db").exists()


class Mismatched(KeywordAdapter):
    def evaluate(self, batch, candidate, capture_traces=False):
        out = super().evaluate(batch, candidate, capture_traces)
        return Batch(out.outputs, out.scores[:-1], out.trajectories)


class NonNumeric(KeywordAdapter):
    def evaluate(self, batch, candidate, capture_traces=False):
        out = super().evaluate(batch, candidate, capture_traces)
        return Batch(out.outputs, ["high"] * len(batch), out.trajectories)


class NonFinite(KeywordAdapter):
    def evaluate(self, batch, candidate, capture_traces=False):
        out = super().evaluate(batch, candidate, capture_traces)
        return Batch(out.outputs, [float("nan")] * len(batch), out.trajectories)


class Raising(KeywordAdapter):
    def evaluate(self, batch, candidate, capture_traces=False):
        if capture_traces:
            raise KeyError("no such field")
        return super().evaluate(batch, candidate, capture_traces)


@pytest.mark.parametrize("adapter, reason", [
    (Mismatched(), "0 scores for a batch of 1"),  # validation in slices of one (adapter_split)
    (NonNumeric(), "non-numeric score 'high'"),
    (NonFinite(), "non-finite score nan"),
    (Raising(), "adapter.evaluate raised KeyError"),
])
def test_a_broken_adapter_fails_the_run_with_a_value_error(tmp_path, adapter, reason):
    with pytest.raises(ValueError, match=reason):
        _optimize(tmp_path, adapter=adapter, max_metric_calls=40)
    with sqlite3.connect(tmp_path / "api.db") as con:
        rows = con.execute("select status, summary_json from runs").fetchall()
    assert len(rows) == 1 and rows[0][0] == "failed"
    assert reason.split(" ")[0] in json.loads(rows[0][1])["stop_reason"]


def test_a_broken_adapter_is_named_with_its_whole_batch_without_slices(tmp_path):
    with pytest.raises(ValueError, match="3 scores for a batch of 4"):
        _optimize(tmp_path, adapter=Mismatched(), max_metric_calls=40, config={"pipeline": {"adapter_split": None}})


@dataclass
class SliceLog(KeywordAdapter):
    """Records (batch size, capture) of every evaluate call."""

    log: list = field(default_factory=list)

    def evaluate(self, batch, candidate, capture_traces=False):
        self.log.append((len(batch), capture_traces))
        return KeywordAdapter.evaluate(self, batch, candidate, capture_traces)


@pytest.mark.parametrize("split, val_calls", [(1, {(1, False)}), (3, {(3, False), (1, False)}), (None, {(4, False)})])
def test_untraced_batches_are_evaluated_in_slices_and_traced_ones_whole(tmp_path, split, val_calls):
    """adapter_split: validation (4 examples) and gate batches go in slices of `split` examples,
    the rollouts whose traces feed the reflective dataset stay whole; the scores are the same."""
    adapter = SliceLog()
    res = _optimize(tmp_path, adapter=adapter, max_metric_calls=60, mode="async",
                    config={"sim": {"time_scale": 1000}, "pipeline": {"adapter_split": split}})
    untraced = {c for c in adapter.log if not c[1]}
    assert {c for c in untraced if c[0] != 3 or split == 3} <= val_calls | {(3, False)}
    assert val_calls <= untraced
    assert {c for c in adapter.log if c[1]} == {(3, True)}  # minibatch rollouts, whole
    assert res.val_aggregate_scores[0] == 0.0 and res.total_metric_calls == sum(n for n, _ in adapter.log)


class DropsTheFrozenLine(KeywordAdapter):
    """Every third proposal drops the component's first line (frozen below); the others add every
    rule statement, which the gate accepts."""

    def __init__(self) -> None:
        super().__init__()
        self.proposed = 0

    def propose_new_texts(self, candidate, reflective_dataset, components_to_update):
        self.proposed += 1
        out = {}
        every = "\n".join(STATEMENT[k] for k in KEYWORDS)
        for name in components_to_update:
            out[name] = every if self.proposed % 3 == 0 else candidate[name] + "\n" + every
        return out


def test_component_types_and_frozen_regions_from_python(tmp_path):
    with pytest.raises(ValueError, match="bogus"):
        _optimize(tmp_path, component_types={"instructions": "bogus"})
    with pytest.raises(ValueError, match="nosuch"):
        _optimize(tmp_path, frozen_regions={"nosuch": ["x"]})
    adapter = DropsTheFrozenLine()
    # mode async: proposals run side by side, so the third (dropping the line) comes before the
    # first accepted one makes every later parent perfect on its minibatch (nothing to propose).
    res = _optimize(tmp_path, adapter=adapter, max_metric_calls=80, mode="async", component_types={"instructions": "prompt"},
                    frozen_regions={"instructions": ["Answer the question."], "style": ["Be friendly."]})
    assert adapter.proposed >= 2 and len(res.candidates) >= 2
    assert all(c["instructions"].startswith("Answer the question.") for c in res.candidates)
    with sqlite3.connect(tmp_path / "api.db") as con:
        summary = json.loads(con.execute("select summary_json from runs where run_id = ?", (res.run_id,)).fetchone()[0])
    assert summary["component_refusals"].get("frozen region", 0) >= 1, summary.get("component_refusals")


class HeldMinibatches(KeywordAdapter):
    """Minibatch rollouts (the traced batches) wait for `go`; validation passes, so the seed is
    validated and a hot-swap can be, while no proposal can finish."""

    def __init__(self) -> None:
        super().__init__()
        self.go = threading.Event()

    def evaluate(self, batch, candidate, capture_traces=False):
        if capture_traces:
            self.go.wait(timeout=60)
        return super().evaluate(batch, candidate, capture_traces)


async def test_a_python_run_serves_attach_and_hot_swap(tmp_path):
    """evotui.optimize serves the control socket: a hot-swap of one component of the adapter run is
    validated with the adapter's evaluate, committed, audited and becomes the active best."""
    from evotui.library.api import optimize_async
    from evotui.control import ControlClient, ControlError, socket_path

    adapter = HeldMinibatches()
    db = tmp_path / "a.db"  # a short path: a unix socket's is limited to ~107 bytes
    run = asyncio.ensure_future(optimize_async(
        SEED, _data(6, 0), _data(4, 10), adapter, reflection_llm="sim", max_proposals=3, db=db, seed=0,
        config={"sim": {"time_scale": 1000}}))
    try:
        def run_id() -> str | None:
            if not db.exists():
                return None
            try:
                with sqlite3.connect(db) as con:
                    row = con.execute("select run_id from runs").fetchone()
            except sqlite3.OperationalError:
                return None  # the file exists before its schema does: look again
            return row[0] if row else None

        while run_id() is None or not socket_path(db, run_id()).exists():
            assert not run.done(), run  # it ended before serving (e.g. a warning about the socket path)
            await asyncio.sleep(0.05)
        client = ControlClient(socket_path(db, run_id()))
        await client.connect()
        while (await client.request("snapshot"))["best_id"] is None:
            await asyncio.sleep(0.05)
        every = "\n".join(STATEMENT[k] for k in KEYWORDS)
        reply = await client.request("edit_component", component="instructions", text=every, reason="from a test",
                                     reply_timeout_s=60)
        # every rule in one edit: the new best on validation, so a minor bump (engine/components/versions.py)
        assert reply["version"] == "1.1.0" and reply["component"] == "instructions"
        with pytest.raises(ControlError, match="no component 'nosuch'"):
            await client.request("edit_component", component="nosuch", text="x", reply_timeout_s=60)
        await client.close()
    finally:
        adapter.go.set()
    res = await run
    assert every in [c["instructions"] for c in res.candidates]
    assert res.val_aggregate_scores[res.best_idx] == 1.0
    with sqlite3.connect(db) as con:
        (n,) = con.execute("select count(*) from audit where transition = 'hot_swap'").fetchone()
    assert n == 1
