"""The TextGrad-style optimizer from the CLI (issue 36): a bad optimizer name in task.toml is one
line naming the file (exit 2), and a run of agent_tools whose tool_lookup is `optimizer =
"textgrad"` makes every tool_lookup proposal in two stored calls (a critique from the traces, a
rewrite from the critique alone), improves tool_lookup, and keeps the critique in the child's
meta, where `export` reads it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.stages.textgrad import APPLY_MARKER, GRADIENT_MARKER
from engine.store.store import read_only_open
from engine.tasks.agentworld_sim import FIX_TEXT
from engine.tasks.agentworld_textgrad_sim import CAUSE
from tests.e2e.conftest import FAST, ROOT, evotui, summary_of

TEXTGRAD = 'name = "tool_lookup"\noptimizer = "textgrad"\n'


def _task(tmp: Path, optimizer_line: str) -> Path:
    task = tmp / "agent_copy"
    shutil.copytree(ROOT / "tasks" / "agent_tools", task)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace('name = "tool_lookup"\n', optimizer_line, 1))
    return task


def test_a_bad_optimizer_name_is_one_line_naming_task_toml(tmp_path: Path, db: Path) -> None:
    task = _task(tmp_path, 'name = "tool_lookup"\noptimizer = "text-grad"\n')
    res = evotui("run", str(task), "--no-ui", "--db", str(db), *FAST)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if "optimizer" in ln]
    assert str(task / "task.toml") in line
    assert "component 'tool_lookup': unknown optimizer 'text-grad'; allowed: reflection, textgrad" in line


async def _proposal_calls(db: Path, run_id: str) -> list[dict]:
    store = await read_only_open(db)
    try:
        return [c async for c in store.iter_llm_calls(run_id) if c["stage"] == "propose"]
    finally:
        await store.close()


@pytest.fixture(scope="module")
def textgrad_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("textgrad")
    db = base / "runs.db"
    res = evotui("run", str(_task(base, TEXTGRAD)), "--no-ui", "--mode", "sync", "--db", str(db),
                 "--max-proposals", "20", "--seed", "3", *FAST)
    assert res.returncode == 0, res.stderr[-2000:]
    return db, summary_of(res)


def test_each_textgrad_proposal_is_a_critique_then_a_step_from_it_alone(textgrad_run) -> None:
    db, summary = textgrad_run
    calls = asyncio.run(_proposal_calls(db, summary["run_id"]))
    by_item: dict[str, list[dict]] = {}
    for c in calls:
        by_item.setdefault(c["item_id"], []).append(c)
    textgrad_items = {i: cs for i, cs in by_item.items() if GRADIENT_MARKER in cs[0]["messages"][0]["content"]}
    assert len(textgrad_items) >= 4  # tool_lookup's turns of the round robin over 4 components
    for item_id, (grad, step) in textgrad_items.items():  # exactly two calls each, gradient first
        assert "## Current instructions: component [tool_lookup]" in grad["messages"][-1]["content"]
        assert "Feedback:" in grad["messages"][-1]["content"] and "```" not in grad["response"]
        assert step["messages"][0]["content"].startswith(APPLY_MARKER)
        step_user = step["messages"][-1]["content"]
        assert "Feedback:" not in step_user and "Order:" not in step_user  # no traces in the step
        critique = grad["response"].strip()
        assert "\n".join(f"> {ln}" if ln else ">" for ln in critique.splitlines()) in step_user
    others = [cs for i, cs in by_item.items() if i not in textgrad_items]
    assert others and all(len(cs) == 1 for cs in others)  # reflection components: one call, as before
    assert summary["llm_by_stage"]["propose"]["calls"] == len(calls) == summary["proposals"] + len(textgrad_items)


def test_textgrad_improves_tool_lookup_and_the_critique_is_in_the_meta(textgrad_run, tmp_path: Path) -> None:
    db, summary = textgrad_run
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT artifact_id, meta_json, components_json, parent_ids_json FROM artifacts "
                            "WHERE run_id = ?", (summary["run_id"],)).fetchall()
    parts = {aid: {c["name"]: c for c in json.loads(comps)} for aid, _, comps, _ in rows}
    metas = {aid: json.loads(meta or "{}") for aid, meta, _, _ in rows}
    parent = {aid: json.loads(ids)[0] for aid, _, _, ids in rows if json.loads(ids or "[]")}
    assert parts["a000000"]["tool_lookup"]["optimizer"] == "textgrad"
    assert "optimizer" not in parts["a000000"]["system"]  # the default is not written
    assert FIX_TEXT["cents"] not in parts["a000000"]["tool_lookup"]["text"]
    made = {aid: m["notes"] for aid, m in metas.items() if "critique" in m.get("notes", {})}
    assert made and all(n["optimizer"] == "textgrad [tool_lookup]" for n in made.values())
    assert all(metas[aid]["changed_components"] == ["tool_lookup"] for aid in made)
    def states_cents(aid: str) -> bool:
        return FIX_TEXT["cents"] in parts[aid]["tool_lookup"]["text"]

    fixed = [aid for aid in made if states_cents(aid) and not states_cents(parent[aid])]
    assert fixed and all(CAUSE["cents"] in made[aid]["critique"] for aid in fixed)  # the step fixed what it named
    best = summary["best_id"]
    assert FIX_TEXT["cents"] in parts[best]["tool_lookup"]["text"] and summary["best_score"] > summary["seed_score"]

    folder = tmp_path / "export"
    exported = evotui("export", summary["run_id"], str(folder), "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    texts = "".join(p.read_text() for p in folder.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
    assert json.dumps(made[fixed[0]]["critique"])[1:-1] in texts
