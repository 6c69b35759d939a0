"""What the components screen writes: tree labels for components and versions, and the audit
panel of one version (the transitions that made it and the attempts from it that did not commit).
Plain text and markup only; colours come from the stylesheet."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.markup import escape

from engine.components.versions import ComponentEntry, ComponentsView, ComponentVersion, VersionAudit

ACTIVE = "★"
HYPOTHESIS = 240
"""Most characters of a reflector's hypothesis shown in the panel."""


def component_label(entry: ComponentEntry) -> Text:
    kind = [entry.type] if entry.type else []
    kind.append("evolvable" if entry.evolvable else "frozen")
    if entry.frozen_regions:
        kind.append(f"{entry.frozen_regions} frozen region{'s' if entry.frozen_regions != 1 else ''}")
    label = Text(entry.name, style="bold")
    label.append("  " + " · ".join(kind))
    return label


def version_label(cv: ComponentVersion, active: str | None) -> Text:
    mark = f"{ACTIVE} " if cv.version == active else "  "
    parent = f"from {cv.parent_version}" if cv.parent_version else "seed"
    label = Text(f"{mark}{cv.version:<7} {cv.artifact_id}  {parent}  v{cv.pool_version}")
    if cv.version == active:
        label.append("  active", style="bold")
    return label


def version_heading(view: ComponentsView, cv: ComponentVersion) -> str:
    parent = f" · from {cv.component}@{cv.parent_version}" if cv.parent_version else " · the seed's version"
    active = f" · {ACTIVE} active" if view.active(cv.component) == cv else ""
    return f"[b]{escape(cv.spec)}[/b] · artifact {cv.artifact_id}{parent} · pool v{cv.pool_version}{active}"


def _first(text: object, n: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _row_detail(r: dict) -> str:
    """The part of an audit row worth a line beside its decision and reason."""
    d = r.get("detail") or {}
    t = r["transition"]
    if t == "reflect":
        evidence = d.get("evidence") or []
        scores = [e["score"] for e in evidence if isinstance(e.get("score"), (int, float))]
        seen = f"{len(evidence)} trace{'s' if len(evidence) != 1 else ''}"
        if scores:
            seen += f", mean {sum(scores) / len(scores):.2f}"
        return f"evidence: {seen}; hypothesis: {_first(d.get('hypothesis'), HYPOTHESIS) or '-'}"
    if t == "improve" and d.get("changed"):
        return "changes " + ", ".join(map(str, d["changed"]))
    if t == "evaluate" and d.get("evaluation"):
        e = d["evaluation"]
        line = f"minibatch {e.get('child_minibatch')} vs parent {e.get('parent_minibatch')}"
        return line + (f", val {e['val_mean']:.3f}" if isinstance(e.get("val_mean"), (int, float)) else "")
    if t == "commit" and d.get("versions"):
        return ", ".join(f"{n}@{v}" for n, v in d["versions"].items())
    if t == "hot_swap":
        return f"by {d.get('by', '?')}, from {d.get('parent_id', '?')} ({d.get('parent_version') or '-'})"
    return ""


def _row_line(r: dict) -> str:
    reason = r.get("reason") or ""
    extra = _row_detail(r)
    text = " · ".join(p for p in (reason, extra) if p)
    return f"  [b]{r['transition']:<8}[/b] {r['decision']:<9} {escape(text)}"


def audit_text(view: ComponentsView, cv: ComponentVersion | None, rows: Sequence[dict] | None,
               audit: VersionAudit | None, loaded: bool) -> str:
    """The audit panel's markup for version `cv` (None: nothing selected)."""
    if cv is None:
        return "Select a version to see its diff and the audit records of the transitions that made it."
    lines = [version_heading(view, cv)]
    if not loaded:
        lines.append("Reading the audit rows…")
    elif rows is None:
        lines.append("This view has no database to read audit rows from.")
    elif not rows:
        lines.append("This run has no audit rows: only an audited strategy writes them (--strategy sepl).")
    elif audit is not None:
        if audit.made:
            lines.append(f"Made by {audit.made[0]['item_id']}:")
            lines.extend(_row_line(r) for r in audit.made)
        elif cv.parent_version is None:
            lines.append("No transition made it: it is the seed's text.")
        else:
            lines.append("No audit row names this version (a merge, or committed before auditing began).")
        if audit.attempts:
            lines.append(f"Not committed from this version ({len(audit.attempts)}):")
            for item in audit.attempts:
                last = item[-1]
                why = " · ".join(p for p in (last.get("reason") or "", _row_detail(last)) if p)
                lines.append(f"  [b]{item[0]['item_id']}[/b] {last['decision']}: {escape(why) or '-'}")
    return "\n".join(lines)
