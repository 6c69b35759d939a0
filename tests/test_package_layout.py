"""The large-scale shape of the code (issue 33): engine/ and evotui/ show their architecture as
packages, and import cycles (lazy, function-level imports included) are the known ones below,
each with the reason it stays. A new cycle, or a module added at the top level past the limit,
fails here; so does a listed cycle that is gone (take it off the list)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL_LIMIT = 8
"""Top-level modules of engine/ and evotui/ besides packages (__init__.py counted)."""

KNOWN_CYCLES = {
    frozenset({"engine.sandbox.core", "engine.sandbox.limit_hints"}):
        "limit_hints names SandboxLimits for typing only; core explains a killed evaluation with it",
    frozenset({"evotui.bench.run", "evotui.bench.real", "evotui.bench.strategies", "evotui.bench.suite"}):
        "the bench's entry dispatches lazily to its real-server, strategies and suite variants, which reuse "
        "its run_one and settings",
    frozenset({"evotui.bench.sim_check", "evotui.commands.sim_calibrate"}):
        "the calibrate command runs the check lazily (--check); the check reads the command's recorded lengths lazily",
}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _modules() -> dict[str, Path]:
    return {_module(f): f for top in ("engine", "evotui") for f in (ROOT / top).rglob("*.py")
            if "sandbox_support" not in f.parts}  # copied into the sandbox, never imported by the engine


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                # `from P import m` of a submodule m depends on m; P itself only for other names.
                subs = [f"{base}.{a.name}" for a in node.names]
                names = [*subs, *([base] if any(sub not in mods for sub in subs) else [])]
            else:
                continue
            for name in names:
                target = resolve(name) if name.split(".")[0] in ("engine", "evotui") else None
                if target is not None and target != m:
                    graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: set[frozenset[str]] = set()
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.add(frozenset(comp))
    return out


def test_engine_and_evotui_keep_few_top_level_modules() -> None:
    for top in ("engine", "evotui"):
        modules = sorted(p.name for p in (ROOT / top).glob("*.py"))
        assert len(modules) <= TOP_LEVEL_LIMIT, f"{top}/ has {len(modules)} top-level modules: {modules}; " \
                                                "put new ones in the package of their concept (README Architecture)"


def test_the_cycle_finder_sees_lazy_imports(tmp_path: Path) -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == {frozenset({"a", "b", "c"})}
    assert _cycles({"a": {"b"}, "b": set()}) == set()


def test_import_cycles_are_only_the_known_ones() -> None:
    found = _cycles(_graph(_modules()))
    new = [sorted(c) for c in found - set(KNOWN_CYCLES)]
    gone = [sorted(c) for c in set(KNOWN_CYCLES) - found]
    assert not new, f"new import cycle(s) {new}: break them (a lazy import counts too)"
    assert not gone, f"cycle(s) {gone} are gone or changed: update KNOWN_CYCLES"
