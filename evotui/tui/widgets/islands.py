"""The islands screen's text blocks: an island's MAP-Elites grid as a heat map (occupied cells with
their elite's score, shaded by score within the island; theme variables only) and the migrations
between islands, newest first."""

from __future__ import annotations

from typing import Mapping

from textual.content import Content

from engine.strategy.islands_view import GridAxis, IslandsView, IslandView
from evotui.tui.widgets.panels import fmt

CELL = 7
"""Columns per grid cell: a score such as "0.740" with a space each side."""
SHADES = (15, 30, 50, 70)
"""Background strength (percent of $success) from the island's lowest to its highest elite."""


def shade(score: float | None, low: float, high: float) -> str:
    if score is None:
        return "$text-muted"
    level = 0 if high <= low else min(len(SHADES) - 1, int((score - low) / (high - low) * len(SHADES)))
    return f"$text on $success {SHADES[level]}%"


def grid_size(island: IslandView, axes: tuple[GridAxis, GridAxis] | None) -> tuple[int, int]:
    """(columns, rows) of the island's grid: the declared axes' bins, else the island's, both ways."""
    if axes is None:
        return island.bins, island.bins
    return axes[0].bins or island.bins, axes[1].bins or island.bins


def heat_map(island: IslandView, feature: str, axes: tuple[GridAxis, GridAxis] | None = None) -> Content:
    """Rows are the second axis's bins (high at the top), columns the first's: text length and
    `feature` by default, the task's declared [[descriptor]] axes when it has them."""
    cells = {(c.x, c.y): c for c in island.cells}
    scores = [c.score for c in island.cells if c.score is not None]
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    cols, rows = grid_size(island, axes)
    declared = axes is not None and axes[0].bins is not None
    across, up = (axes[0].name, axes[1].name) if declared else ("length", feature)
    lines = [Content.assemble((f"island {island.index}", "bold $text-primary"),
                              f" · {len(cells)} of {cols * rows} cells · best "
                              f"{island.best_id or '-'} {fmt(island.best_score)}"),
             Content.styled(f"{up} ↑" + (f"  ({axes[1].detail})" if declared else ""),
                            "$text-muted")]
    for y in reversed(range(rows)):
        parts: list[Content | tuple[str, str] | str] = [(f"{y:>3} │", "$text-muted")]
        for x in range(cols):
            cell = cells.get((x, y))
            if cell is None:
                parts.append(("·".center(CELL), "$text-muted"))
            else:
                mark = "bold " if cell.artifact_id == island.best_id else ""
                parts.append((fmt(cell.score).center(CELL), mark + shade(cell.score, low, high)))
        lines.append(Content.assemble(*parts))
    lines.append(Content.styled("    └" + "─" * (CELL * cols), "$text-muted"))
    lines.append(Content.styled("     " + "".join(str(x).center(CELL) for x in range(cols)) + f"  {across} →"
                                + (f"  ({axes[0].detail})" if declared else ""), "$text-muted"))
    elites = sorted(island.cells, key=lambda c: (-(c.score or 0.0), c.artifact_id))
    lines.append(Content.styled(f"elites (cell {across},{up if declared else 'behaviour'})", "bold $text-muted"))
    lines.extend(Content.assemble(f"  {c.artifact_id} ", (f"({c.x},{c.y})", "$text-muted"), f" {fmt(c.score)}")
                 for c in elites)
    return Content("\n").join(lines)


def migrations_text(view: IslandsView, seen_at: Mapping[tuple[str, int, int], int], opened_at: int) -> Content:
    """Migrations grouped by migrant and source island, newest first; those that happened while
    the screen watched are marked with the pool version they were first seen at."""
    groups: dict[tuple[str, int], list[int]] = {}
    for m in view.migrations:
        groups.setdefault((m.artifact_id, m.from_island), []).append(m.to_island)
    first = {(m.artifact_id, m.from_island): seen_at.get((m.artifact_id, m.from_island, m.to_island), opened_at)
             for m in view.migrations}
    # One short line each: the box is 30 columns wide at 80x24.
    lines = [Content.styled("migrations", "bold $text-primary"),
             Content.styled(f"every {view.migration_interval} commits, next in {view.next_migration_in}", "$text-muted"),
             Content.styled(f"where diversity differs > {view.migration_threshold:g}"
                            if view.migration_trigger == "diversity" else "to both ring neighbours", "$text-muted")]
    if not groups:
        lines.append(Content.styled("none yet", "$text-muted"))
    order = {key: n for n, key in enumerate(groups)}  # the migrants' commit order
    for (aid, src), targets in sorted(groups.items(), key=lambda kv: (-first[kv[0]], -order[kv[0]])):
        new = first[(aid, src)] > opened_at
        lead = (f"new v{first[(aid, src)]} ", "bold $text-warning") if new else ("", "")
        lines.append(Content.assemble(lead, f"{aid} island {src} → {', '.join(map(str, sorted(targets)))}"))
    lines.extend(recorded_lines(view))
    return Content("\n").join(lines)


RECORDED = 8
"""Newest recorded migrations listed (the count says how many there are in all)."""


def recorded_lines(view: IslandsView) -> list[Content]:
    """Each migration the run recorded (the fold's log, which the ledger writes as migrations rows),
    newest first: pool version, islands, trigger figures, migrants."""
    if not view.events:
        return []
    out = [Content.assemble(("recorded", "bold $text-primary"), f" · {len(view.events)} in all")]
    for m in reversed(view.events[-RECORDED:]):
        why = f" D {m.source_diversity:.2f} vs {m.target_diversity:.2f}" if view.migration_trigger == "diversity" else ""
        out.append(Content.assemble(f"v{m.version} {m.source} → {m.target}", (why, "$text-muted")))
        out.append(Content.styled("  " + (", ".join(m.artifact_ids) or "none new"), "" if m.artifact_ids else "$text-muted"))
    return out
