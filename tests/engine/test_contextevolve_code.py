"""Issue 36, ContextEvolve §4.2: the Summarizer reads the child's code (eq. 4: the parent's abstract
and the offspring's raw code), bounded; `exemplars_as_code` puts code excerpts of the Sampler's
exemplars in the generator's prompt. Unit checks on hand-made pools, then two short simulated
runs whose stored LLM calls are read back: what the Summarizer and the proposer were sent, and the
token cost of the option by stage."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

from engine.pool import Artifact, Pool
from engine.stages.strategy_stages import NOTE_CHARS
from engine.store.store import Store
from engine.strategy.context_agents import (CODE_CHARS, EXEMPLAR_CODE_CHARS, NOTE_BUDGET, ContextAgents,
                                            ContextEvolveSettings, code_excerpt)
from engine.strategy.contextevolve import ContextEvolveOptions
from tests.engine.test_contextevolve import FakeEnv, _view

ROOT = Path(__file__).resolve().parents[2]


def _program(tag: str, body_lines: int) -> str:
    body = "".join(f"    value_{tag}_{k} = {k}\n" for k in range(body_lines))
    return (f"import math\n\n# EVOLVE-BLOCK-START\ndef build():\n    first_line_{tag} = 1\n{body}"
            f"    last_line_{tag} = 2\n# EVOLVE-BLOCK-END\n\nprint('entry point {tag}')\n")


def _pool(*texts: str) -> Pool:
    pool = Pool()
    for n, text in enumerate(texts):
        pool.add(Artifact(f"a{n:06d}", text, (f"a{n - 1:06d}",) if n else (), n, {"score": 0.1 * (n + 1)},
                          status="confirmed" if n else "seed",
                          meta={"notes": {"summary": f"NEW: idea {n}.\nPRESERVES: base"}} if n else {}))
    return pool


def test_the_summarizer_reads_the_childs_code_bounded() -> None:
    parent = _program("p", 10)
    pool = _pool(parent)
    agents = ContextAgents(ContextEvolveSettings())
    # A one-line change far from the end: the diff alone never shows the entry point.
    child = parent.replace("value_p_2 = 2", "value_p_2 = 3")
    env = FakeEnv(pool, replies=["NEW: a.\nPRESERVES: b"])
    asyncio.run(agents.summarize(_view(pool, "a000000", 1, child=child, score=0.5), env))
    user = env.asked[0][1][1]["content"]
    assert "## The candidate's code\n```\n" + child in user  # the whole child, byte for byte
    assert "print('entry point p')" in user and "+    value_p_2 = 3" in user  # code, and the diff as a pointer

    huge = _program("p", 2000)  # ~50k characters
    assert len(huge) > 5 * CODE_CHARS
    env = FakeEnv(pool, replies=["NEW: a.\nPRESERVES: b"])
    asyncio.run(agents.summarize(_view(pool, "a000000", 1, child=huge, score=0.5), env))
    user = env.asked[0][1][1]["content"]
    code = user.split("## The candidate's code\n```\n", 1)[1].split("\n```", 1)[0]
    assert f"[{len(huge) - CODE_CHARS} characters cut]" in code
    assert code.startswith("import math") and code.endswith("print('entry point p')\n")  # head and tail kept
    assert CODE_CHARS <= len(code) <= CODE_CHARS + 60


def _sampled(as_code: bool, body_lines: int, picks: tuple[str, ...] = ("a000001", "a000003")) -> tuple[str, Pool]:
    pool = _pool(*(_program(f"e{n}", body_lines) for n in range(6)))
    agents = ContextAgents(ContextEvolveSettings(exemplars=len(picks), exemplars_as_code=as_code))
    env = FakeEnv(pool, replies=["EXEMPLARS: " + ", ".join(picks)])
    notes = asyncio.run(agents.sample(_view(pool, "a000005", 5), env))
    return notes["exemplars"], pool


def test_exemplars_as_code_puts_excerpts_in_the_note_within_its_budget() -> None:
    assert NOTE_BUDGET == NOTE_CHARS  # the proposer's cut is what the excerpts are sized for
    plain, _ = _sampled(False, 10)
    assert "```" not in plain and "value_e1_" not in plain
    note, pool = _sampled(True, 10)
    assert note.startswith(plain.split("\n- a000003")[0])  # the summaries come first, unchanged
    for aid in ("a000001", "a000003"):
        region = pool.get(aid).text.split("EVOLVE-BLOCK-START\n")[1].split("\n# EVOLVE-BLOCK-END")[0]
        assert f"code of {aid}:\n```\n{region}\n```" in note  # the evolving part, whole (it is short)
    assert "import math" not in note and "entry point" not in note  # not the fixed code around it

    capped, pool = _sampled(True, 400)  # long programs: each excerpt at the cap, head and tail kept
    assert len(capped) <= NOTE_BUDGET and capped.count("characters cut]") == 2
    assert "first_line_e1" in capped and "last_line_e3" in capped
    assert code_excerpt(pool.get("a000001").text, EXEMPLAR_CODE_CHARS) in capped
    four = ("a000001", "a000002", "a000003", "a000004")
    shared, pool = _sampled(True, 400, four)  # four excerpts at the cap would not fit: they share the budget
    assert len(shared) <= NOTE_BUDGET and shared.count("characters cut]") == 4
    for aid in four:
        assert f"code of {aid}:" in shared and code_excerpt(pool.get(aid).text, EXEMPLAR_CODE_CHARS) not in shared


def test_the_option_is_validated() -> None:
    assert ContextEvolveOptions(exemplars_as_code=True).exemplars_as_code is True
    assert ContextEvolveOptions().exemplars_as_code is False
    with pytest.raises(pydantic.ValidationError):
        ContextEvolveOptions(exemplars_as_code="sometimes")
    with pytest.raises(pydantic.ValidationError):
        ContextEvolveOptions(exemplar_code=True)  # a misspelt key is refused (extra="forbid")


def _run(tmp: Path, name: str, as_code: bool) -> tuple[Path, dict]:
    db = tmp / f"{name}.db"
    args = ["run", "circle_packing", "--strategy", "contextevolve", "--no-ui", "--max-proposals", "12",
            "--seed", "3", "--time-scale", "2000", "--quiet", "--db", str(db)]
    if as_code:
        cfg = tmp / "code.toml"
        cfg.write_text("[strategy.contextevolve]\nexemplars_as_code = true\n")
        args += ["--config", str(cfg)]
    proc = subprocess.run([sys.executable, "-m", "evotui.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return db, json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


def _stored(db: Path, run_id: str, stage: str) -> tuple[list[tuple[str, str]], dict[str, dict]]:
    """(item id, user message) of the run's stored calls of `stage`, and the items' payloads."""
    async def read():
        store = await Store.open(db, create=False, readonly=True)
        try:
            calls = [(call["item_id"], m["content"]) async for call in store.iter_llm_calls(run_id)
                     if call["stage"] == stage for m in (call["messages"] or []) if m["role"] == "user"]
            items = {i["item_id"]: i["payload"] or {} for i in await store.fetch_rows("items", run_id)}
            return calls, items
        finally:
            await store.close()
    return asyncio.run(read())


def _user_messages(db: Path, run_id: str, stage: str) -> list[str]:
    return [text for _, text in _stored(db, run_id, stage)[0]]


def test_simulated_runs_show_the_code_and_its_token_cost(tmp_path: Path) -> None:
    off_db, off = _run(tmp_path, "off", False)
    on_db, on = _run(tmp_path, "on", True)
    summarized, items = _stored(off_db, off["run_id"], "summarize")
    assert summarized
    for item_id, user in summarized:  # each Summarizer call was sent the code its item evaluated
        child = items[item_id]["child"]
        assert len(child) < CODE_CHARS and f"## The candidate's code\n```\n{child}\n```" in user
    off_prompts = _user_messages(off_db, off["run_id"], "propose")
    on_prompts = _user_messages(on_db, on["run_id"], "propose")
    assert not any(">   code of a0" in u for u in off_prompts)
    with_code = [u for u in on_prompts if ">   code of a0" in u]
    assert with_code and all("> def construct_packing" in u for u in with_code)  # quoted exemplar code
    # The cost is the proposer's: it reads the excerpts; the agents' own calls do not change.
    # (per request: replies and their lengths differ between the two runs, prompts are what is read)
    mean_on, mean_off = (sum(map(len, p)) / len(p) for p in (on_prompts, off_prompts))
    assert mean_on > mean_off
    def calls(summary: dict, stage: str) -> int:  # a stage with no call (the Sampler had <= k choices) is absent
        return summary["llm_by_stage"].get(stage, {}).get("calls", 0)
    assert calls(on, "navigate") > 0
    for stage in ("navigate", "sample"):
        assert calls(on, stage) == calls(off, stage)
