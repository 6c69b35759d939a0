"""The analyses on hand-made traces: cycling classes (literal / tuning / trivial), lineage
figures, the odds ratio, judge-answer parsing with one re-ask then unknown, the judge cache
(schema v5 migration from a v4 database), and the simulator's judge behaviour."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine.llm.sim import edit_judge
from engine.llm.sim.answer import answer
from engine.store import SCHEMA_VERSION, Store
from engine.trace.analyze import cycling, edits, lineage
from engine.trace.model import Trace
import random


def _cand(cid: str, parent: str | None, source: str, score: float, it: int) -> dict:
    return {"candidate_id": cid, "kind": "artifact", "status": "confirmed", "iteration": it,
            "parent_ids": [parent] if parent else [], "source": source, "val_mean": score,
            "created_at": float(it)}


def _trace(chain: list[tuple[str, str]], scores: list[float]) -> Trace:
    cands, edges = [], []
    for i, ((cid, src), s) in enumerate(zip(chain, scores)):
        parent = chain[i - 1][0] if i else None
        cands.append(_cand(cid, parent, src, s, i))
        if parent:
            edges.append({"parent_id": parent, "child_id": cid, "operator": "mutate", "generation_mode": "diff"})
    return Trace(run={"run_id": "r", "task": "t", "status": "completed", "created_at": 0.0},
                 candidates=cands, edges=edges)


BASE = "def f():\n    rate = 0.99992\n    # tuned by hand\n    return rate\n"


def test_cycling_classes_on_a_hand_made_lineage() -> None:
    t = _trace([
        ("s", BASE),
        ("a", BASE.replace("rate = 0.99992", "rate = 0.99988").replace("    # tuned by hand\n", "")),
        ("b", BASE.replace("rate = 0.99992", "rate = 0.99988")),          # comment back: trivial
        ("c", BASE),                                                      # 0.99992 back: literal
        ("d", BASE.replace("rate = 0.99992", "rate = 0.5")),              # same skeleton: tuning
    ], [0.1, 0.2, 0.2, 0.3, 0.3])
    res = cycling.analyze(t)
    per = {e["child_id"]: e for e in res["per_edit"]}
    assert (per["a"]["recycled"], per["b"]["trivial"], per["c"]["literal"], per["d"]["tuning"]) == (0, 1, 1, 1)
    assert res["by_class"] == {"literal": 1, "tuning": 1, "trivial": 1}
    assert res["added_lines"] == 4 and res["recycle_rate"] == 0.75
    assert [g["generation"] for g in res["per_generation"]] == [1, 2, 3, 4]


def test_short_lines_and_other_lineages_do_not_count() -> None:
    t = _trace([("s", "x=1\nvalue = compute(3)\n"), ("a", "x=2\n"), ("b", "x=1\n")], [0.1, 0.2, 0.3])
    res = cycling.analyze(t)
    assert res["recycled_lines"] == 0 and res["added_lines"] == 0  # "x=1" is shorter than 5
    sibling = _trace([("s", "alpha = 1\n"), ("a", "beta = 2\n")], [0.1, 0.2])
    sibling.candidates.append(_cand("z", "s", "alpha = 1\ngamma = 3\n", 0.1, 2))
    assert cycling.analyze(sibling)["recycled_lines"] == 0  # a's deletion is not z's lineage


def test_lineage_figures() -> None:
    t = _trace([("s", "a\n"), ("a", "b\n"), ("b", "c\n"), ("c", "d\n")], [0.0, 0.9, 0.95, 0.92])
    t.candidates.append(_cand("x", "s", "e\n", 0.1, 4))
    res = lineage.analyze(t)
    assert res["best_id"] == "b" and res["best_depth"] == 2 and res["proposals"] == 4
    assert res["dead_branch_share"] == 0.5 and res["proposals_to_best"] == 2
    assert [p["proposal"] for p in res["timeline"]] == [0, 1, 2]
    assert res["jackpot_then_flat"] is True  # 0.9 of the 0.95 gain in one step, by half the budget


def test_odds_ratio_with_continuity_correction() -> None:
    assert edits.odds_ratio(3, 1, 2, 4) == pytest.approx((3.5 * 4.5) / (1.5 * 2.5))
    assert edits.odds_ratio(0, 0, 5, 5) == pytest.approx(1.0)
    assert edits.odds_ratio(4, 0, 0, 4) == pytest.approx(81.0)


def test_parse_labels() -> None:
    assert edits.parse_labels('["bug_fix", "Pruning"]') == ["bug_fix", "pruning"]
    assert edits.parse_labels('Labels: ["refactor"] because...') == ["refactor"]
    assert edits.parse_labels('{"labels": ["efficiency"]}') == ["efficiency"]
    assert edits.parse_labels("it is a refactor") is None


class _FakeClient:
    def __init__(self, replies: list[str]) -> None:
        self.replies, self.calls = list(replies), 0

    async def chat(self, messages, *, stage, temperature=None, **_):
        from engine.llm.client import ChatResult

        assert temperature == 0.0 and edits.SYSTEM.splitlines()[0] in messages[0]["content"]
        self.calls += 1
        return ChatResult(self.replies.pop(0), "stop", 1, 1, 0.0, 0)

    async def aclose(self) -> None:
        pass


async def test_judge_reasks_once_then_unknown_and_caches(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "j.db", create=True)
    try:
        e1 = edits.Edit("s", "a", "-x = 1\n+x = 2\n", True, key="k1")
        e2 = edits.Edit("s", "b", "-y = 1\n+z = 1\n", False, key="k2")
        client = _FakeClient(["not json", "still not", "sure: [\"refactor\"]"])
        stats = await edits.label(store, [e1, e2], lambda: client, "m", concurrency=1)
        assert client.calls == 3 and stats.invalid_answers == 2 and stats.unknown == 1
        assert e1.labels == ["unknown"] and e2.labels == ["refactor"]
        again = [edits.Edit("s", "a", "", True, key="k1"), edits.Edit("s", "b", "", False, key="k2")]
        stats = await edits.label(store, again, lambda: pytest.fail("no LLM on a cached analysis"), "m")
        assert stats.calls == 0 and stats.cached == 2 and again[1].labels == ["refactor"]
    finally:
        await store.close()


async def test_v4_database_migrates_to_v5(tmp_path: Path) -> None:
    db = tmp_path / "v4.db"
    store = await Store.open(db, create=True)
    await store.close()
    with sqlite3.connect(db) as conn:  # back to v4: drop what v5 (judge_labels) and later versions added
        conn.execute("DROP TABLE judge_labels")
        conn.execute("DROP TABLE IF EXISTS audit")  # v6
        conn.execute("DROP TABLE IF EXISTS steering")  # v7
        conn.execute("ALTER TABLE llm_calls DROP COLUMN cached_tokens")  # v8
        conn.execute("DROP TABLE IF EXISTS migrations")  # v9
        conn.execute("PRAGMA user_version = 4")
    store = await Store.open(db, create=False)
    try:
        assert await store.schema_version() == SCHEMA_VERSION >= 5
        store.put_judge_labels("k", model="m", labels=["pruning"], invalid_answers=0, created_at=1.0)
        await store.flush()
        assert await store.judge_labels(["k", "other"]) == {"k": ["pruning"]}
    finally:
        await store.close()


@pytest.mark.parametrize("diff, want", [
    ("-    rate = 0.5\n+    rate = 0.7\n", ["hyperparameter_tuning"]),
    ("+import scipy\n+    x = scipy.optimize(f)\n", ["external_dependency"]),
    ("+def helper(x):\n+    return x * 2\n", ["composition"]),
    ("-def helper(x):\n-    return x * 2\n", ["pruning"]),
    ("-    for i in range(n):\n-        out[i] = a[i] * 2\n+    out = np.multiply(a, 2)\n", ["efficiency"]),
    ("+    if d <= 0:\n+        return 0.0\n", ["bug_fix"]),
    ("-    # old note\n+    # new note\n", ["refactor"]),
])
def test_sim_judge_labels_by_content(diff: str, want: list[str]) -> None:
    messages = [{"role": "system", "content": edits.SYSTEM}, {"role": "user", "content": diff}]
    assert json.loads(answer(messages, "analyze", random.Random(0))) == want
    assert edit_judge.MARKER in edits.SYSTEM
