"""LoongFlow's executor fix loop (engine/strategy/executor.py, engine/stages/executor_fix.py,
engine/code/local_checks.py): the local checks, the variants' bounds, and whole runs of a small
program task on a scripted LLM, read back from the stored rows as a reviewer would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from engine.run import setup as run_setup
from engine.code.local_checks import local_errors
from engine.run.runner import EngineRun
from engine.store import read_only_open
from engine.strategy import SearchParams, build
from engine.strategy.executor import REPAIR_STAGE, ExecutorSpec
from engine.strategy.loongflow import LoongFlowOptions
from tests.engine.fakes import HANG_S, completion

PROGRAM = '''"""Return a number as large as possible, at most 10."""
import math

# EVOLVE-BLOCK-START
def value():
    x = 2.5
    return x
# EVOLVE-BLOCK-END
'''
EVALUATOR = '''
import importlib.util, sys


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    v = float(mod.value())
    return {"combined_score": v if v <= 10 else 0.0}
'''
TASK_TOML = '''name = "tiny"
kind = "program"
description = "Make value() as large as possible, at most 10."
initial_program = "initial_program.py"
evaluator = "evaluator.py"

[program]
patch_format = "diff"
max_patch_retries = 1
eval_timeout_s = 30
'''


def block(old: str, new: str) -> str:
    return f"Change it.\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


BROKEN = block("    x = 2.5", "    x = (3.5")
NEEDS_MODULE = block("    x = 2.5", "    import evotui_no_such_module_xyz\n    x = 4.5")
FIXED = block("    x = 2.5", "    x = 5.5")


def write_program_task(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(TASK_TOML)
    (folder / "initial_program.py").write_text(PROGRAM)
    (folder / "evaluator.py").write_text(EVALUATOR)
    return folder


# -- the local checks ---------------------------------------------------------------------------
def test_local_checks_name_syntax_compile_and_import_errors_and_pass_good_programs(tmp_path: Path) -> None:
    assert local_errors(PROGRAM) == []
    syntax = local_errors(PROGRAM.replace("x = 2.5", "x = (2.5"))
    assert len(syntax) == 1 and syntax[0].startswith("syntax: line 6, column 9: '(' was never closed")
    # ast.parse accepts a return outside a function; compile does not
    outside = local_errors("return 1\n")
    assert outside[0].startswith("syntax:") or outside[0].startswith("compile:")
    assert "outside function" in outside[0]
    missing = local_errors("import os\nfrom evotui_no_such_pkg_q.sub import x\nimport numpy\n")
    assert missing == ["import: no module named 'evotui_no_such_pkg_q' (line 2)"]
    # an optional import with a fallback, a relative import and a module of the task's folder pass
    guarded = "try:\n    import evotui_no_such_pkg_q\nexcept ImportError:\n    evotui_no_such_pkg_q = None\n"
    assert local_errors(guarded) == []
    assert local_errors("from . import sibling\n") == []
    (tmp_path / "helper_mod_q.py").write_text("X = 1\n")
    assert local_errors("import helper_mod_q\n", task_dir=tmp_path) == []
    assert local_errors("import helper_mod_q\n") == ["import: no module named 'helper_mod_q' (line 1)"]


def test_checking_imports_executes_nothing(tmp_path: Path) -> None:
    """find_spec on a top-level name searches, it does not import: the module's code never runs."""
    marker = tmp_path / "ran"
    (tmp_path / "side_effect_mod_q.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    assert local_errors("import side_effect_mod_q\nopen('/nonexistent/boom')\n", task_dir=tmp_path) == []
    assert not marker.exists()


# -- the variants -------------------------------------------------------------------------------
def test_the_variants_bound_the_repair_calls() -> None:
    assert ExecutorSpec("chat", 3).rounds_for(5.0) == 0
    assert ExecutorSpec("react", 3).rounds_for(0.0) == 3
    fuse = ExecutorSpec("fuse", 2, fuse_threshold=0.9)
    assert (fuse.rounds_for(0.5), fuse.mode_for(0.5)) == (0, "chat")
    assert (fuse.rounds_for(0.9), fuse.mode_for(0.95)) == (2, "react")
    with pytest.raises(ValueError, match="executor must be one of chat, react, fuse"):
        ExecutorSpec("tool")


def test_the_paper_defaults_reach_the_strategy_and_bad_values_name_the_key() -> None:
    cfg = LoongFlowOptions()
    assert (cfg.executor, cfg.executor_fix_rounds, cfg.fuse_threshold) == ("react", 2, 0.9)
    strategy = build("loongflow", "program", SearchParams(options={"loongflow": {"executor": "fuse",
                                                                                 "executor_fix_rounds": 4}}))
    assert strategy.executor == ExecutorSpec("fuse", 4, 0.9)
    assert build("openevolve", "program", SearchParams()).executor is None
    with pytest.raises(ValidationError, match="executor"):
        LoongFlowOptions(executor="tool")
    with pytest.raises(ValidationError, match="executor_fix_rounds"):
        LoongFlowOptions(executor_fix_rounds=-1)


# -- whole runs ---------------------------------------------------------------------------------
class ScriptedLLM:
    """Answers proposal requests from a script (the rest of the conversation is recorded)."""

    def __init__(self, propose: list[str], fixes: list[str]) -> None:
        self.script = {"propose": propose, REPAIR_STAGE: fixes}
        self.requests: list[tuple[str, list[dict]]] = []

    def transport(self, _cfg=None, *_a, **_kw) -> tuple[httpx.MockTransport, None]:
        return httpx.MockTransport(self.handler), None

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "m", "object": "model"}]})
        stage = request.headers.get("X-Evotui-Stage", "")
        messages = json.loads(request.content)["messages"]
        self.requests.append((stage, messages))
        replies = self.script.get(stage)
        if not replies:
            raise AssertionError(f"unexpected {stage} request")
        return completion(replies.pop(0))


async def run_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM, proposals: int,
                   executor: str = "react", rounds: int = 2):
    monkeypatch.setattr(run_setup, "sim_transport", llm.transport)
    task = write_program_task(tmp_path / "tiny")
    layer = {"seed": 0, "task_llm": {"max_retries": 0},
             "pipeline": {"mode": "sync", "merge": False}, "budget": {"max_proposals": proposals},
             "strategy": {"name": "loongflow", "loongflow": {"pes": False, "islands": 1, "executor": executor,
                                                            "executor_fix_rounds": rounds}}}
    db = tmp_path / "runs.db"
    run = await EngineRun.create(str(task), [("test", layer)], db)
    import asyncio
    result = await asyncio.wait_for(run.run(), HANG_S)
    store = await read_only_open(db)
    try:
        rows = {t: await store.fetch_rows(t, run.ctx.run_id) for t in ("items", "artifacts", "llm_calls")}
    finally:
        await store.close()
    return result, rows


def _meta(row: dict) -> dict:
    meta = row.get("meta") if "meta" in row else json.loads(row.get("meta_json") or "{}")
    return meta if isinstance(meta, dict) else json.loads(meta)


async def test_a_syntax_error_is_repaired_before_evaluation_and_recorded(tmp_path, monkeypatch) -> None:
    llm = ScriptedLLM(propose=[BROKEN], fixes=[FIXED])
    result, rows = await run_with(tmp_path, monkeypatch, llm, proposals=1)
    assert result.status == "completed"
    child = [a for a in rows["artifacts"] if a["artifact_id"] != "a000000"]
    assert len(child) == 1 and "x = 5.5" in child[0]["text"]
    fix = _meta(child[0])["executor_fix"]
    assert fix["executor"] == "react" and fix["outcome"] == "repaired"
    assert fix["first_errors"][0].startswith("syntax: line 6")
    assert [(c["round"], c["result"]) for c in fix["calls"]] == [(1, "fixed")]
    assert "'(' was never closed" in fix["calls"][0]["reason"]
    stages = [r["stage"] for r in rows["llm_calls"]]
    assert stages.count("propose") == 1 and stages.count(REPAIR_STAGE) == 1
    # the repair request continues the proposal's conversation with the errors
    repair = [m for s, m in llm.requests if s == REPAIR_STAGE][0]
    assert repair[-2] == {"role": "assistant", "content": BROKEN}
    assert repair[-1]["content"].startswith("## Patch errors\nYour patch applied") and "never closed" in repair[-1]["content"]


async def test_an_unfixable_candidate_fails_after_the_bound_with_its_reason(tmp_path, monkeypatch) -> None:
    llm = ScriptedLLM(propose=[NEEDS_MODULE], fixes=[NEEDS_MODULE, BROKEN])
    result, rows = await run_with(tmp_path, monkeypatch, llm, proposals=1)
    failed = [r for r in rows["items"] if r["outcome"] == "failed"]
    assert len(failed) == 1
    assert failed[0]["error"].startswith("local check: syntax: line 6, column 9: '(' was never closed")
    assert failed[0]["error"].endswith("(after 2 repair calls)")
    payload = failed[0]["payload"] if isinstance(failed[0]["payload"], dict) else json.loads(failed[0]["payload"])
    fix = payload["executor_fix"]
    assert fix["outcome"] == "failed"
    assert fix["first_errors"] == ["import: no module named 'evotui_no_such_module_xyz' (line 6)"]
    assert [c["round"] for c in fix["calls"]] == [1, 2]
    assert fix["calls"][0]["result"].startswith("still failing: import")
    assert [r["stage"] for r in rows["llm_calls"]].count(REPAIR_STAGE) == 2
    assert [a["artifact_id"] for a in rows["artifacts"]] == ["a000000"]  # nothing was evaluated or committed
    assert result.summary["filters"]["executor_failed"] == 1


async def test_chat_makes_no_repair_call(tmp_path, monkeypatch) -> None:
    llm = ScriptedLLM(propose=[BROKEN], fixes=[])
    result, rows = await run_with(tmp_path, monkeypatch, llm, proposals=1, executor="chat")
    assert [r["stage"] for r in rows["llm_calls"]] == ["propose"]
    failed = [r for r in rows["items"] if r["outcome"] == "failed"]
    assert len(failed) == 1 and re.match(r"syntax: line 6", failed[0]["error"])  # the validate filter's verdict
