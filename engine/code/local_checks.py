"""Pre-evaluation checks a candidate program gets without being run (LoongFlow §4.1.2, the
executor's "Local Verification Loop"): it must parse and compile, and every module it imports
must be findable. Nothing of the candidate is executed: ``compile`` only builds a code object,
and ``importlib.util.find_spec`` is asked about top-level module names only, which searches the
import path without importing anything.

The import check uses the engine's interpreter, the one the local sandbox runs candidates with.
Imports inside a ``try`` that handles ImportError (an optional dependency with a fallback) are
left alone, as are relative imports and modules that are files of the task's folder.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from engine.code.evolve_blocks import check_syntax
from engine.code.languages import PYTHON, LanguageSpec

GUARDS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _guarded_imports(tree: ast.AST) -> set[int]:
    """ids of import nodes inside a try whose handlers catch an import failure."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        names = set()
        for h in node.handlers:
            if h.type is None:
                names.add("BaseException")
            for n in ast.walk(h.type) if h.type is not None else ():
                if isinstance(n, ast.Name):
                    names.add(n.id)
        if names & GUARDS:
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def imported_modules(tree: ast.AST) -> list[tuple[str, int]]:
    """(top-level module name, line) of every absolute, unguarded import, first occurrence each."""
    guarded = _guarded_imports(tree)
    seen: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            seen.setdefault(name.split(".")[0], node.lineno)
    return sorted(seen.items(), key=lambda kv: kv[1])


def _findable(name: str, task_dir: Path | None) -> bool:
    if name in sys.builtin_module_names or name in sys.modules:
        return True
    if task_dir is not None and ((task_dir / f"{name}.py").is_file() or (task_dir / name / "__init__.py").is_file()):
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def local_errors(text: str, language: LanguageSpec = PYTHON, task_dir: Path | None = None) -> list[str]:
    """What stops the candidate before any evaluation: a syntax or compile error, or imports that
    cannot be found (Python); for another language, its grammar's first error. [] = passes."""
    problem = check_syntax(text, language)
    if problem is not None:
        return [f"syntax: {problem}"]
    if not language.ast_verdict:
        return []
    try:
        tree = ast.parse(text)
        compile(tree, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return [f"compile: {getattr(exc, 'msg', None) or exc}" + (f" (line {line})" if line else "")]
    return [f"import: no module named {name!r} (line {line})"
            for name, line in imported_modules(tree) if not _findable(name, task_dir)]
