"""Text blocks beside a diff: a pending item's evidence (scores against its parent and the pool's
best, the staleness policy's decisions, the proposer's guidance) and an artifact's strategy notes,
selection tags and, for programs, why it is in the population.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from textual.content import Content

from engine.pipeline.review import PendingReview
from evotui.tui.backend import ArtifactView, ReviewEvidence
from evotui.tui.widgets.panels import fmt

NOTE_WIDTH = 160
"""A note longer than this is cut: the full text is in the artifact's meta (and `evotui show`)."""


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _delta(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    return f" ({'+' if a >= b else ''}{fmt(a - b)})"


def _field(name: str, value: str | Content) -> Content:
    return Content.assemble((f"{name:<10}", "bold $text-muted"), value)


def _clip(text: str) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= NOTE_WIDTH else one[: NOTE_WIDTH - 1] + "…"


def notes_lines(notes: Mapping[str, Any]) -> list[Content]:
    return [_field(str(k), _clip(v)) for k, v in notes.items() if str(v).strip()]


def tags_text(tags: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in tags.items())


def evidence_text(item: PendingReview, ev: ReviewEvidence | None, best_id: str | None,
                  best_score: float | None) -> Content:
    """Child vs parent vs best, the staleness decisions and the guidance notes of one item."""
    known = ev is not None
    ev = ev or ReviewEvidence()
    lines: list[Content] = []
    child_mb, parent_mb = _mean(ev.child_mb), _mean(ev.parent_mb)
    if ev.child_mb or ev.parent_mb:
        lines.append(_field("minibatch", f"child {fmt(child_mb)} vs parent {fmt(parent_mb)}{_delta(child_mb, parent_mb)}"
                            f" on {max(len(ev.child_mb), len(ev.parent_mb))} examples"))
    elif item.gate == "evaluate":
        lines.append(_field("minibatch", Content.styled("not scored yet (held before evaluation)", "$text-muted")))
    score = "not evaluated yet" if ev.child_score is None else fmt(ev.child_score)
    best = f"best {best_id} {fmt(best_score)}" if best_id else "no best yet"
    lines.append(_field("score", f"child {score} · parent {item.parent_id} {fmt(ev.parent_score)}"
                        f"{_delta(ev.child_score, ev.parent_score)} · {best}{_delta(ev.child_score, best_score)}"))
    if ev.staleness:
        lines.append(_field("staleness", " · ".join(ev.staleness)))
    elif ev.gaps:
        lines.append(_field("staleness", " · ".join(f"{stage} gap {gap}" for stage, gap in ev.gaps.items())))
    if ev.tags:
        lines.append(_field("selection", tags_text(ev.tags)))
    if ev.rationale:
        lines.append(_field("rationale", ev.rationale))
    lines.extend(notes_lines(ev.notes))
    if known and not ev.notes and not ev.rationale:
        lines.append(_field("notes", Content.styled("the strategy wrote no guidance for this proposal", "$text-muted")))
    return Content("\n").join(lines)


def is_program(a: ArtifactView) -> bool:
    return "metrics" in a.meta


def acceptance(a: ArtifactView, arts: Sequence[ArtifactView]) -> str:
    """Why a program is in the population: every program that runs and is scored is kept
    (unless the strategy gates on its parent's score); a new best beats all earlier ones."""
    if a.status == "seed":
        return "the seed program"
    if a.status != "confirmed" or a.score is None:
        return f"{a.status}: not in the population"
    earlier = [x.score for x in arts if x.score is not None and x.status in ("seed", "confirmed")
               and x.version < a.version]
    before = max(earlier, default=None)
    if before is None or a.score > before:
        return f"accepted and a new best ({fmt(a.score)} > {fmt(before)} before it)"
    return (f"accepted into the population (it ran and was scored), not a new best: "
            f"{fmt(a.score)} <= best {fmt(before)} before it")


NOTE_ORDER = ("plan", "summary", "guidance", "exemplars")
"""loongflow's PES plan and summary; contextevolve's NEW/PRESERVES summary, guidance and exemplars."""


def strategy_notes(meta: Mapping[str, Any]) -> dict[str, str]:
    """The artifact's strategy notes in reading order, bookkeeping (`*_version`) left out."""
    notes = meta.get("notes")
    if not isinstance(notes, Mapping):
        return {}
    keys = [k for k in NOTE_ORDER if k in notes] + sorted(str(k) for k in notes if k not in NOTE_ORDER)
    return {k: str(notes[k]).strip() for k in keys if not k.endswith("_version") and str(notes[k]).strip()}


def notes_panel(a: ArtifactView) -> Content:
    """Every strategy note of an artifact in full, one titled block each, its lines kept
    (a summary's NEW / PRESERVES lines, one exemplar per line)."""
    notes = strategy_notes(a.meta)
    if not notes:
        return Content.styled(f"{a.artifact_id}: no plan, summary or guidance from the strategy", "$text-muted")
    blocks = [Content.assemble((name, "bold $text-primary"), "\n", text) for name, text in notes.items()]
    return Content("\n\n").join(blocks)


def artifact_text(a: ArtifactView, arts: Sequence[ArtifactView], best_id: str | None,
                  with_notes: bool = True, recycled: Mapping[str, str] | None = None) -> Content:
    """An artifact's score, selection tags, strategy notes (one clipped line each, unless
    `with_notes` is off because a notes panel shows them in full) and (programs) acceptance."""
    mark = " ★ best" if a.artifact_id == best_id else ""
    lines = [Content.styled(f"{a.artifact_id}{mark}", "bold $text-primary"),
             _field("status", f"{a.status} · score {fmt(a.score)} · v{a.version}" + (f" · {a.note}" if a.note else ""))]
    if is_program(a):
        lines.append(_field("accepted", acceptance(a, arts)))
    if recycled:
        lines.append(_field("recycled", Content.styled(
            f"{len(recycled)} added line{'s' if len(recycled) > 1 else ''} its lineage deleted before: "
            + " · ".join(f"{kind} `{_clip(line)}`" for line, kind in recycled.items()), "$text-warning")))
    selection = a.meta.get("selection")
    if isinstance(selection, Mapping) and selection:
        lines.append(_field("selection", tags_text(selection)))
    notes = a.meta.get("notes")
    if with_notes and isinstance(notes, Mapping) and notes:
        lines.extend(notes_lines(notes))
    elif with_notes:
        lines.append(_field("notes", Content.styled("none from the strategy", "$text-muted")))
    return Content("\n").join(lines)
