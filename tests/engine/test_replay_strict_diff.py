"""Issue 36: `evotui replay --variant strict-diff` (EvoTrace §5.3 asked strictly).

A short simulated circle_packing run gives a recorded mutation; the replay LLM is replaced by a
client that answers the saved prompt with four hand-made replies: the recorded edit as an exact
SEARCH/REPLACE block, the same block with trailing spaces on its SEARCH lines (it applies only with
whitespace-tolerant matching), an edit of other lines, and a block that matches nothing. The
rows are read the way a reviewer would: what parsed, what matched byte for byte, the overlap of
each edit with the recorded one, and which exact prompt was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.store.store import Store
from engine.trace import collect, replay
from engine.trace.errors import TraceError
from engine.trace.llm import Choice

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("strict") / "runs.db"
    proc = subprocess.run([sys.executable, "-m", "evotui.cli", "run", "circle_packing", "--no-ui", "--db", str(db),
                           "--max-proposals", "8", "--seed", "3", "--time-scale", "2000", "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])["run_id"]
    return db, run_id


def _trace(db: Path, run_id: str):
    async def go():
        store = await Store.open(db, create=False, readonly=True)
        try:
            return await collect.collect(store, run_id)
        finally:
            await store.close()
    return asyncio.run(go())


def _block(search: list[str], replace: list[str]) -> str:
    return "<<<<<<< SEARCH\n" + "".join(search) + "=======\n" + "".join(replace) + ">>>>>>> REPLACE\n"


def _edit_span(parent: list[str], child: list[str]) -> tuple[int, int, int]:
    """First differing line, end of the change in parent and in child (common suffix dropped)."""
    i = next(k for k in range(min(len(parent), len(child))) if parent[k] != child[k])
    a, b = len(parent), len(child)
    while a > i and b > i and parent[a - 1] == child[b - 1]:
        a, b = a - 1, b - 1
    return i, a, b


class ScriptedClient:
    """Stands in for the replay endpoint: the i-th request gets the i-th reply."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.sent = list(replies), []

    async def chat(self, messages, stage="default", **_):
        self.sent.append(messages)
        return type("Reply", (), {"text": self.replies[len(self.sent) - 1]})()

    async def aclose(self) -> None:
        pass


def test_strict_diff_refuses_tolerant_matches_and_measures_edit_overlap(recorded, monkeypatch) -> None:
    db, run_id = recorded
    trace = _trace(db, run_id)
    by_id = trace.by_id()
    cand = next(c for c in trace.artifacts() if c["parent_ids"] and c["meta"].get("patch_format") == "diff"
                and any(x["item_id"] == c["meta"].get("item_id") and x["stage"] == "propose" for x in trace.contexts))
    parent = by_id[cand["parent_ids"][0]]
    p_lines = parent["source"].splitlines(keepends=True)
    c_lines = cand["source"].splitlines(keepends=True)
    i, a, b = _edit_span(p_lines, c_lines)
    search = p_lines[i - 1:a + 1]  # one line of context each side: a unique match
    exact = _block(search, c_lines[i - 1:b + 1])
    tolerant = _block([ln.rstrip("\n") + "  \n" for ln in search], c_lines[i - 1:b + 1])
    # Another edit: a line of the parent's EVOLVE-BLOCK the recorded edit leaves alone.
    start = next(k for k, ln in enumerate(p_lines) if "EVOLVE-BLOCK-START" in ln)
    other = next(k for k in range(start + 1, len(p_lines))
                 if (k < i - 1 or k > a) and "=" in p_lines[k] and parent["source"].count(p_lines[k]) == 1)
    different = _block([p_lines[other]], [p_lines[other].rstrip("\n") + "  # replayed\n"])
    nowhere = _block(["this line is not in the program\n"], ["x = 1\n"])
    client = ScriptedClient([exact, tolerant, different, nowhere])
    monkeypatch.setattr(replay, "make_client", lambda *a, **k: client)

    async def run(variant: str) -> dict:
        store = await Store.open(db, create=False, readonly=True)
        try:
            return await replay.replay(store, run_id, cand["candidate_id"], 4, variant=variant, choice=Choice(sim=True))
        finally:
            await store.close()

    res = asyncio.run(run("strict-diff"))
    saved = next(x["messages"] for x in trace.contexts if x["item_id"] == cand["meta"]["item_id"]
                 and x["stage"] == "propose")
    assert all(m == saved for m in client.sent)  # the recorded prompt, byte for byte
    rows = res["replies"]
    assert [r["parsed"] for r in rows] == [True, False, True, False]
    assert rows[0]["exact"] and rows[0]["edit_overlap"] == 1.0 and rows[0]["score"] == pytest.approx(cand["val_mean"])
    assert "strict-diff" in rows[1]["error"] and "whitespace" in rows[1]["error"]
    assert not rows[2]["exact"] and rows[2]["edit_overlap"] == 0.0
    assert "not found" in rows[3]["error"]
    assert res["parse_rate"] == 0.5 and res["exact_match_rate"] == 0.25
    assert res["mean_edit_overlap"] == pytest.approx(0.5)

    client.replies, client.sent = [exact, tolerant, different, nowhere], []
    loose = asyncio.run(run("exact"))  # the run's own matching: the padded block applies
    assert [r["parsed"] for r in loose["replies"]] == [True, True, True, False]
    assert loose["replies"][1]["exact"] and "mean_edit_overlap" not in loose


def test_strict_diff_refuses_a_full_rewrite_run(recorded, monkeypatch) -> None:
    db, run_id = recorded
    trace = _trace(db, run_id)
    cand = next(c for c in trace.artifacts() if c["parent_ids"] and c["meta"].get("patch_format") == "diff")
    monkeypatch.setattr(replay, "make_client", lambda *a, **k: ScriptedClient([]))
    # The same run, as if it had asked for full rewrites: its candidates record patch format full.
    original = collect.collect

    async def as_full(store, rid):
        t = await original(store, rid)
        for c in t.candidates:
            c["meta"] = {**(c["meta"] or {}), "patch_format": "full"}
        return t

    monkeypatch.setattr(collect, "collect", as_full)

    async def run() -> dict:
        store = await Store.open(db, create=False, readonly=True)
        try:
            return await replay.replay(store, run_id, cand["candidate_id"], 1, variant="strict-diff",
                                       choice=Choice(sim=True))
        finally:
            await store.close()

    with pytest.raises(TraceError, match="strict-diff needs a diff or udiff run"):
        asyncio.run(run())


def test_cli_prints_the_overlap_and_refuses_bad_input(recorded) -> None:
    db, run_id = recorded
    trace = _trace(db, run_id)
    cand = next(c for c in trace.artifacts() if c["parent_ids"] and c["meta"].get("patch_format") == "diff")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "evotui.cli", "replay", run_id, *args, "--db", str(db)],
                              capture_output=True, text=True, timeout=300, cwd=ROOT)

    proc = cli(cand["candidate_id"], "-n", "2", "--variant", "strict-diff", "--llm", "sim")
    assert proc.returncode == 0, proc.stderr
    assert "strict-diff prompt" in proc.stdout and "overlap" in proc.stdout.splitlines()[1]
    assert "replay/original" in proc.stdout and "mean edit overlap" in proc.stdout
    bad = cli(cand["candidate_id"], "-n", "1", "--variant", "strict")
    assert bad.returncode == 2 and "strict-diff" in bad.stderr and "Traceback" not in bad.stderr
