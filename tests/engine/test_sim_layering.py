"""The simulator knows no task: nothing under engine/llm/sim imports engine.tasks.

It is a measuring instrument that must answer any prompt layout by what the messages contain;
task knowledge reaches it only as plug-ins handed in by the caller (engine/llm/sim/plugins.py).
The check is static (ast), so it also covers imports inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.llm.sim import answer as sim_answer
from engine.llm.sim.plugins import SimBehaviour
from engine.tasks.sim_behaviours import all_behaviours

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "engine" / "llm" / "sim"


def _is_task(module: str) -> bool:
    return module == "engine.tasks" or module.startswith("engine.tasks.")


def task_imports(source: str, package: str = "engine.llm.sim") -> list[str]:
    """Every import of engine.tasks (or anything under it) in a module of ``package``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if _is_task(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import, resolved against the package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found += [m for m in (base, *(f"{base}.{a.name}" for a in node.names)) if _is_task(m)][:1]
    return found


def test_the_checker_sees_every_form_of_task_import() -> None:
    assert task_imports("import engine.tasks.ruleworld") == ["engine.tasks.ruleworld"]
    assert task_imports("from engine.tasks.ruleworld import score") == ["engine.tasks.ruleworld"]
    assert task_imports("from engine import tasks") == ["engine.tasks"]
    assert task_imports("def f():\n    from engine.tasks import ruleworld\n") == ["engine.tasks"]
    assert task_imports("from ...tasks import ruleworld") == ["engine.tasks"]
    assert task_imports("from ... import tasks") == ["engine.tasks"]
    assert task_imports("from . import program_model\nfrom .. import errors") == []
    assert task_imports("from engine import config\nimport engine.llm.sim.plugins") == []


def test_no_sim_module_imports_a_task() -> None:
    modules = sorted(SIM.rglob("*.py"))
    assert len(modules) >= 6
    offenders = {str(p.relative_to(ROOT)): hits for p in modules if (hits := task_imports(p.read_text()))}
    assert offenders == {}


def test_without_plugins_the_sim_answers_generically() -> None:
    """The rules layout means nothing to a bare simulator, and the built-in plug-ins satisfy the protocol."""
    import random

    msgs = [{"role": "system", "content": "Sort fruit lists alphabetically (A to Z)."},
            {"role": "user", "content": "Category: fruit\nItems: pear, apple\nWrite the formatted list on one line."}]
    bare = sim_answer.answer(msgs, "rollout", random.Random(0))
    with_rules = sim_answer.answer(msgs, "rollout", random.Random(0), all_behaviours())
    assert not bare.startswith("Reasoning:") and with_rules.startswith("Reasoning: 2 fruit items")
    assert all(isinstance(b, SimBehaviour) for b in all_behaviours())
