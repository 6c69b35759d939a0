"""The strategy seam's layering, checked statically the way test_import_hygiene checks textual.

- engine/pipeline (the scheduler) imports no task kind and no strategy: it drives whatever
  SearchHandlers it is given, by the stages they declare.
- engine/strategy (the parts of a search) imports no pipeline machinery, kind or runner.
- engine/context.py imports nothing above it (typing-only imports aside).
- Item kinds are typed fields, not payload keys; modes are compared in the mode table only;
  nothing probes handlers with hasattr.
(The simulator's rule, no task module, is tests/engine/test_sim_layering.py.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ROOT / "engine"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path) -> list[str]:
    """Modules a file imports, resolved, leaving out `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found += [base, *(f"{base}.{a.name}" for a in node.names)]
    return found


def _offenders(files: list[Path], banned: tuple[str, ...]) -> dict[str, list[str]]:
    out = {}
    for path in files:
        hits = sorted({m for m in _runtime_imports(path) if any(m == b or m.startswith(b + ".") for b in banned)})
        if hits:
            out[str(path.relative_to(ROOT))] = hits
    return out


def _py(folder: str) -> list[Path]:
    files = sorted((ENGINE / folder).rglob("*.py"))
    assert files, folder
    return files


def test_the_import_reader_resolves_relative_and_skips_typing_only(tmp_path: Path) -> None:
    pkg = tmp_path / "engine" / "pipeline"
    pkg.mkdir(parents=True)
    f = pkg / "x.py"
    f.write_text("from typing import TYPE_CHECKING\nfrom ..stages import prompt_stages\n"
                 "if TYPE_CHECKING:\n    from engine.strategy import gepa\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert "engine.stages.prompt_stages" in _runtime_imports(f)
        assert not any(m.startswith("engine.strategy") for m in _runtime_imports(f))
    finally:
        ROOT = saved


def test_the_pipeline_imports_no_kind_and_no_strategy() -> None:
    assert _offenders(_py("pipeline"), ("engine.stages", "engine.strategy", "engine.run.runner", "engine.tasks")) == {}


def test_strategies_import_no_pipeline_machinery_kind_or_runner() -> None:
    banned = ("engine.pipeline", "engine.stages", "engine.run.runner", "engine.ledger", "engine.store")
    assert _offenders(_py("strategy"), banned) == {}


def test_context_imports_nothing_above_it() -> None:
    banned = ("engine.pipeline", "engine.stages", "engine.strategy", "engine.run.runner", "engine.ledger")
    assert _offenders([ENGINE / "context.py"], banned) == {}


SOURCES = sorted(p for p in ENGINE.rglob("*.py") if "sandbox_support" not in p.parts)
KIND_KEYS = "merge|speculative|gated|head_text|head_seq|head_chain|chain_of"
PATTERNS = {
    "payload-key item kind": re.compile(rf'"({KIND_KEYS})"\s+(not\s+)?in\s+(\w+\.)*payload'
                                        rf'|payload\.get\("({KIND_KEYS})"|payload\["({KIND_KEYS})"\]'),
    "mode compared outside the mode table": re.compile(r"\bmode\s*(==|!=)|\bmode\s+(not\s+)?in\s*[(\[{]"),
    "hasattr probing": re.compile(r"\bhasattr\(\s*(self\.)?(handlers|stages)\b|getattr\(\s*(self\.)?handlers\b"),
}
ALLOWED = {"mode compared outside the mode table": {"engine/pipeline/modes.py"},
           "payload-key item kind": {"engine/items/work_item.py"}}  # the stored layout's one reader and writer


@pytest.mark.parametrize("rule", sorted(PATTERNS))
def test_no_forbidden_pattern(rule: str) -> None:
    hits = []
    for path in SOURCES:
        rel = str(path.relative_to(ROOT))
        if rel in ALLOWED.get(rule, set()):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if PATTERNS[rule].search(line):
                hits.append(f"{rel}:{n}: {line.strip()}")
    assert hits == []


@pytest.mark.parametrize("line, rule", [
    ('if "merge" in item.payload:', "payload-key item kind"),
    ('x = item.payload.get("gated")', "payload-key item kind"),
    ('spec = item.payload["speculative"]', "payload-key item kind"),
    ('if cfg.mode == "chain":', "mode compared outside the mode table"),
    ('if hasattr(self.handlers, "reflect"):', "hasattr probing"),
    ('getattr(handlers, "abandon", None)', "hasattr probing"),
])
def test_the_patterns_catch_what_they_name(line: str, rule: str) -> None:
    assert PATTERNS[rule].search(line)
