"""Named components of an artifact (GEPA's candidate: a dict of module name -> instructions).

A one-string artifact is the one-component case: `Artifact.components` is None and the text is
the artifact. A multi-component artifact keeps its parts in `Artifact.components` and its
*rendering* in `Artifact.text`, so every reader that needs one string (the task model's system
prompt, the stale-item reflection, chain rebases, the review editor, stored rows) keeps working.

The rendering, in component order, one header line per component and a blank line between:

    ## [planner]
    Plan the answer before writing it.

    ## [formatter]
    Write the list on one line.

It is parsed back (`parse_rendering`) against the names the parent had, so a text edited as a
whole (a reviewer's edit, a reflection patch, a three-way merge of renderings) becomes components
again. A name is letters, digits, `_`, `.` or `-`; a component text never contains a header line
of its own artifact (the proposer refuses such a text), so the parse is unambiguous.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

NAME = re.compile(r"[A-Za-z0-9_.-]+")
_HEADER = re.compile(r"^## \[([A-Za-z0-9_.-]+)\]\s*$")


@dataclass(frozen=True)
class Component:
    name: str
    text: str
    evolvable: bool = True


Components = tuple[Component, ...]


def header(name: str) -> str:
    return f"## [{name}]"


def render(components: Sequence[Component]) -> str:
    """One text for where one string is needed (see the module docstring)."""
    return "\n\n".join(f"{header(c.name)}\n{c.text.strip()}" for c in components)


def split_rendering(text: str) -> list[tuple[str, str]] | None:
    """(name, text) of each component of a rendering, found by its header lines alone; None if
    the text does not start with a header or names repeat (then it is a one-component text)."""
    lines = text.strip().splitlines()
    if not lines or not _HEADER.match(lines[0]):
        return None
    parts: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _HEADER.match(line)
        if m:
            parts.append((m.group(1), []))
        else:
            parts[-1][1].append(line)
    names = [n for n, _ in parts]
    if len(set(names)) != len(names):
        return None
    return [(n, "\n".join(body).strip()) for n, body in parts]


def parse_rendering(text: str, template: Sequence[Component]) -> Components | None:
    """The components of `text`, a rendering with exactly `template`'s names in its order (their
    evolvable flags are kept); None if the headers do not match."""
    found = split_rendering(text)
    if found is None or [n for n, _ in found] != [c.name for c in template]:
        return None
    return tuple(Component(c.name, body, c.evolvable) for c, (_, body) in zip(template, found))


def has_header_line(text: str, names: Iterable[str]) -> bool:
    """Whether `text` holds a header line of one of `names` (it would split the rendering)."""
    wanted = {header(n) for n in names}
    return any(line.rstrip() in wanted for line in text.splitlines())


def evolvable(components: Sequence[Component]) -> list[str]:
    return [c.name for c in components if c.evolvable]


def replace(components: Sequence[Component], updates: dict[str, str]) -> Components:
    """The components with `updates` (name -> new text) applied; the others untouched."""
    return tuple(Component(c.name, updates[c.name].strip(), c.evolvable) if c.name in updates else c
                 for c in components)


def changed(parent: Sequence[Component], child: Sequence[Component]) -> list[str]:
    """Names whose text differs (same names, same order assumed)."""
    old = {c.name: c.text.strip() for c in parent}
    return [c.name for c in child if old.get(c.name) != c.text.strip()]


def to_json(components: Sequence[Component] | None) -> list[dict] | None:
    """The `components_json` column: None for the one-component case."""
    if components is None:
        return None
    return [{"name": c.name, "text": c.text, "evolvable": c.evolvable} for c in components]


def from_json(raw: object) -> Components | None:
    """Inverse of `to_json`; None (a NULL column) stays None."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError(f"components must be a list, got {type(raw).__name__}")
    return tuple(Component(str(d["name"]), str(d["text"]), bool(d.get("evolvable", True))) for d in raw)


def _unified(old: str, new: str, name: str) -> str:
    return "\n".join(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{name} (parent)",
                                          f"{name} (child)", lineterm=""))


def component_pairs(parent_text: str, child_text: str) -> tuple[list[tuple[str, str, str]], list[str]] | None:
    """([(name, parent text, child text)] of the changed components, [names unchanged]) of two
    renderings (an added or removed component pairs with ""); None if either is not one."""
    old, new = split_rendering(parent_text), split_rendering(child_text)
    if old is None or new is None:
        return None
    before, after = dict(old), dict(new)
    names = [n for n, _ in new] + [n for n, _ in old if n not in after]
    changed_ = [(n, before.get(n, ""), after.get(n, "")) for n in names if before.get(n, "") != after.get(n, "")]
    return changed_, [n for n in names if before.get(n, "") == after.get(n, "")]


def component_diff_texts(parent_text: str, child_text: str) -> list[tuple[str, str]] | None:
    """Per-component unified diffs of two renderings, changed components only; None if either
    text is not a rendering."""
    pairs = component_pairs(parent_text, child_text)
    return None if pairs is None else [(n, _unified(a, b, n)) for n, a, b in pairs[0]]


def component_diff(parent, child) -> list[tuple[str, str]]:
    """(name, unified diff) of each component `child` changed against `parent` (two Artifacts);
    a one-component pair is one entry named "text" (empty list when nothing changed)."""
    if parent.components is None or child.components is None:
        return [] if parent.text == child.text else [("text", _unified(parent.text, child.text, "text"))]
    before = {c.name: c.text for c in parent.components}
    return [(c.name, _unified(before.get(c.name, ""), c.text, c.name)) for c in child.components
            if before.get(c.name, "").strip() != c.text.strip()]
