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

A component has a type (TYPES; `tool_code` must stay valid Python, `agent_config` valid JSON or
TOML) and frozen regions: exact texts every edit must keep verbatim, declared in the task
(`frozen = [...]`) or marked in the seed's text by the lines `# evotui:frozen` and
`# evotui:end-frozen` (the region runs from one marker line to the other, both included).
`refusal` checks an update against both, `rules_section` tells the proposer.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
import tomllib
from dataclasses import dataclass
from dataclasses import replace as _with
from typing import Iterable, Sequence

NAME = re.compile(r"[A-Za-z0-9_.-]+")
_HEADER = re.compile(r"^## \[([A-Za-z0-9_.-]+)\]\s*$")


TYPES = {
    "prompt": "a prompt the model reads as instructions",
    "tool_description": "the description of a tool the agent can call (what it takes and returns)",
    "tool_code": "the Python source of a tool function; it must stay valid Python (it is parsed, never run)",
    "agent_config": "the agent's configuration; it must stay valid {fmt}, as it is now",
    "text": "free text",
}
"""Component types and what each means for an edit (the proposer's prompt states it)."""
DEFAULT_TYPE = "text"
OPTIMIZERS = ("reflection", "textgrad")
"""Resource optimizers (Autogenesis §3.2): one reflection call that rewrites the component, or a
TextGrad-style step of two calls, a critique (the textual gradient) and a rewrite from it alone."""
DEFAULT_OPTIMIZER = "reflection"


def check_optimizer(name: str, optimizer: object) -> str:
    """`optimizer` if it is one of OPTIMIZERS, else ValueError naming the component."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"component {name!r}: unknown optimizer {optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    return optimizer  # type: ignore[return-value]


def check_type(name: str, type_: object) -> str:
    """`type_` if it is a known component type, else ValueError naming the component."""
    if type_ not in TYPES:
        raise ValueError(f"component {name!r}: unknown type {type_!r}; allowed types: {', '.join(TYPES)}")
    return type_  # type: ignore[return-value]


@dataclass(frozen=True)
class Component:
    name: str
    text: str
    evolvable: bool = True
    type: str = DEFAULT_TYPE
    """One of TYPES."""
    frozen: tuple[str, ...] = ()
    """Regions every edit must keep verbatim (declared in the task, or marked in the seed's text)."""
    optimizer: str = DEFAULT_OPTIMIZER
    """How a proposal rewrites it: one of OPTIMIZERS (engine/stages/textgrad.py for "textgrad")."""


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
    return tuple(_with(c, text=body) for c, (_, body) in zip(template, found))


def has_header_line(text: str, names: Iterable[str]) -> bool:
    """Whether `text` holds a header line of one of `names` (it would split the rendering)."""
    wanted = {header(n) for n in names}
    return any(line.rstrip() in wanted for line in text.splitlines())


def evolvable(components: Sequence[Component]) -> list[str]:
    return [c.name for c in components if c.evolvable]


def replace(components: Sequence[Component], updates: dict[str, str]) -> Components:
    """The components with `updates` (name -> new text) applied; the others untouched."""
    return tuple(_with(c, text=updates[c.name].strip()) if c.name in updates else c for c in components)


def changed(parent: Sequence[Component], child: Sequence[Component]) -> list[str]:
    """Names whose text differs (same names, same order assumed)."""
    old = {c.name: c.text.strip() for c in parent}
    return [c.name for c in child if old.get(c.name) != c.text.strip()]


def to_json(components: Sequence[Component] | None) -> list[dict] | None:
    """The `components_json` column: None for the one-component case."""
    if components is None:
        return None
    # optimizer only when not the default, so rows of reflection-only runs read as before
    return [{"name": c.name, "text": c.text, "evolvable": c.evolvable, "type": c.type, "frozen": list(c.frozen),
             **({"optimizer": c.optimizer} if c.optimizer != DEFAULT_OPTIMIZER else {})}
            for c in components]


def from_json(raw: object) -> Components | None:
    """Inverse of `to_json`; None (a NULL column) stays None. Rows written before components had
    types and frozen regions load as type "text" with none."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError(f"components must be a list, got {type(raw).__name__}")
    out = []
    for d in raw:
        name = str(d["name"])
        frozen = d.get("frozen") or []
        if not isinstance(frozen, list):
            raise ValueError(f"component {name!r}: frozen must be a list of texts, got {type(frozen).__name__}")
        out.append(Component(name, str(d["text"]), bool(d.get("evolvable", True)),
                             check_type(name, d.get("type", DEFAULT_TYPE)), tuple(str(r) for r in frozen),
                             check_optimizer(name, d.get("optimizer", DEFAULT_OPTIMIZER))))
    return tuple(out)


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


# -- types and frozen regions: what an update must keep -----------------------------------------
MARK_START, MARK_END = "# evotui:frozen", "# evotui:end-frozen"
"""Marker lines of a frozen region in a seed text (a comment in Python and TOML, a line in prose;
a JSON text has no comments: declare its regions with `frozen = [...]` in the task)."""
SHOWN_CHARS = 60
"""Most characters of a frozen region quoted in a refusal message."""


def marked_regions(text: str) -> list[str]:
    """The regions of `text` marked by MARK_START / MARK_END lines (both included); ValueError for
    a marker without its partner or nested markers."""
    regions: list[str] = []
    start: int | None = None
    lines = text.splitlines()
    for n, line in enumerate(lines):
        mark = line.strip()
        if mark == MARK_START:
            if start is not None:
                raise ValueError(f"line {n + 1}: `{MARK_START}` inside a frozen region; close it with `{MARK_END}` "
                                 "first")
            start = n
        elif mark == MARK_END:
            if start is None:
                raise ValueError(f"line {n + 1}: `{MARK_END}` without a `{MARK_START}` line before it")
            regions.append("\n".join(lines[start:n + 1]).strip())
            start = None
    if start is not None:
        raise ValueError(f"line {start + 1}: `{MARK_START}` is never closed by a `{MARK_END}` line")
    return regions


def config_format(text: str) -> str | None:
    """"JSON" or "TOML": what an agent_config text parses as (JSON first); None if neither."""
    try:
        json.loads(text)
    except ValueError:
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        return "TOML"
    return "JSON"


def syntax_error(type_: str, text: str, fmt: str | None = None) -> str | None:
    """Why `text` is not valid for `type_` (None when it is). tool_code is parsed with `ast`,
    never executed; agent_config must parse as `fmt` (the format its current text has), or as
    JSON or TOML when `fmt` is None."""
    if type_ == "tool_code":
        try:
            ast.parse(text)
        except SyntaxError as exc:
            return f"is not valid Python (line {exc.lineno}: {exc.msg})"
        return None
    if type_ == "agent_config":
        if fmt is None:
            return None if config_format(text) else "is neither valid JSON nor valid TOML"
        try:
            json.loads(text) if fmt == "JSON" else tomllib.loads(text)
        except ValueError as exc:  # TOMLDecodeError is one
            return f"is not valid {fmt} ({exc})"
    return None


def with_rules(part: Component, type_: object = DEFAULT_TYPE, frozen: object = ()) -> Component:
    """`part` with its type and frozen regions (`frozen` declared, then the ones its text marks),
    checked against its text: a seed must satisfy what every edit will have to. ValueError names
    the component and the problem."""
    name = part.name
    type_ = check_type(name, type_)
    if isinstance(frozen, str) or not isinstance(frozen, (list, tuple)) \
            or not all(isinstance(r, str) and r.strip() for r in frozen):
        raise ValueError(f"component {name!r}: frozen must be a list of non-empty texts, e.g. [\"def f(x):\"]")
    try:
        marked = marked_regions(part.text)
    except ValueError as exc:
        raise ValueError(f"component {name!r}: {exc}") from None
    regions: list[str] = []
    for region in [r.strip() for r in frozen] + marked:
        if region not in part.text:
            raise ValueError(f"component {name!r}: frozen region {short_region(region)} is not in its text; a frozen "
                             "region must be copied exactly from it")
        if region not in regions:
            regions.append(region)
    error = syntax_error(type_, part.text)
    if error is not None:
        raise ValueError(f"component {name!r}: its text (type {type_}) {error}")
    return _with(part, type=type_, frozen=tuple(regions))


def short_region(region: str) -> str:
    flat = " ".join(region.split())
    return f"`{flat[:SHOWN_CHARS]}{'...' if len(flat) > SHOWN_CHARS else ''}`"


def refusal(part: Component, new_text: str) -> tuple[str, str] | None:
    """(reason key, message) when `new_text` may not replace `part`'s text: it drops or alters a
    frozen region ("frozen region"), or breaks the type's syntax ("invalid tool_code", "invalid
    agent_config"); None when it may. The message names the component and the region or error."""
    for n, region in enumerate(part.frozen, start=1):
        if region not in new_text:
            return "frozen region", f"[{part.name}] drops or alters frozen region {n} {short_region(region)}"
    fmt = config_format(part.text) if part.type == "agent_config" else None
    error = syntax_error(part.type, new_text, fmt)
    if error is not None:
        return f"invalid {part.type}", f"[{part.name}] {error}"
    return None


def enforce(parent: Sequence[Component], child: Sequence[Component]
            ) -> tuple[Components, dict[str, tuple[str, str]]]:
    """`child` with every refused update (see `refusal`) put back to the parent's text, and
    {name: (reason key, message)} of the refused ones (same names, same order assumed)."""
    before = {c.name: c for c in parent}
    refused: dict[str, tuple[str, str]] = {}
    out = []
    for c in child:
        old = before[c.name]
        why = refusal(old, c.text) if c.text.strip() != old.text.strip() else None
        if why is not None:
            refused[c.name] = why
        out.append(old if why is not None else c)
    return tuple(out), refused


def enforce_rendering(parts: Components, child: str) -> tuple[str | None, list[str], dict[str, tuple[str, str]]]:
    """A proposal's rendering with the rules applied (see `enforce`): (the rendering, the names
    still changed, the refused ones), or (None, [], refused) when no change is left. A rendering
    whose headers do not match `parts` is returned as it is."""
    proposed = parse_rendering(child, parts)
    if proposed is None:
        return child, changed(parts, parts), {}
    kept, refused = enforce(parts, proposed)
    if not refused:
        return child, changed(parts, proposed), {}
    left = changed(parts, kept)
    return (render(kept) if left else None), left, refused


def _quoted_region(region: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in region.splitlines())


def rules_section(parts: Sequence[Component], targets: Sequence[str]) -> str | None:
    """The proposer's `## Component rules` for `targets`: each one's type and what it requires,
    and its frozen regions quoted (`Frozen region N of [name]:` then `> ` lines); None when every
    target is plain text without frozen regions (the prompt stays as it was)."""
    by_name = {c.name: c for c in parts}
    chosen = [by_name[n] for n in targets if n in by_name]
    if all(c.type == DEFAULT_TYPE and not c.frozen for c in chosen):
        return None
    lines = ["## Component rules"]
    for c in chosen:
        what = TYPES[c.type].format(fmt=config_format(c.text) or "JSON or TOML")
        lines.append(f"Component [{c.name}] has type {c.type}: {what}.")
        if c.frozen:
            lines.append(f"Component [{c.name}] has {len(c.frozen)} frozen region(s): keep each one in your text "
                         "exactly as it is, character for character; an edit that drops or alters one is refused.")
            for n, region in enumerate(c.frozen, start=1):
                lines.append(f"Frozen region {n} of [{c.name}]:\n{_quoted_region(region)}")
    return "\n".join(lines) + "\n"
