"""The islands screen's text blocks: an island's MAP-Elites grid as a heat map (occupied cells with
their elite's score, shaded by score within the island; theme variables only) and the migrations
between islands, newest first."""

from __future__ import annotations

from typing import Mapping

from textual.content import Content

from engine.strategy.islands_view import IslandsView, IslandView
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


def heat_map(island: IslandView, feature: str) -> Content:
    """Rows are the behaviour bins (high at the top), columns the text-length bins."""
    cells = {(c.x, c.y): c for c in island.cells}
    scores = [c.score for c in island.cells if c.score is not None]
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    lines = [Content.assemble((f"island {island.index}", "bold $text-primary"),
                              f" · {len(cells)} of {island.bins * island.bins} cells · best "
                              f"{island.best_id or '-'} {fmt(island.best_score)}"),
             Content.styled(f"{feature} ↑", "$text-muted")]
    for y in reversed(range(island.bins)):
        parts: list[Content | tuple[str, str] | str] = [(f"{y:>3} │", "$text-muted")]
        for x in range(island.bins):
            cell = cells.get((x, y))
            if cell is None:
                parts.append(("·".center(CELL), "$text-muted"))
            else:
                mark = "bold " if cell.artifact_id == island.best_id else ""
                parts.append((fmt(cell.score).center(CELL), mark + shade(cell.score, low, high)))
        lines.append(Content.assemble(*parts))
    lines.append(Content.styled("    └" + "─" * (CELL * island.bins), "$text-muted"))
    lines.append(Content.styled("     " + "".join(str(x).center(CELL) for x in range(island.bins)) + "  length →",
                                "$text-muted"))
    elites = sorted(island.cells, key=lambda c: (-(c.score or 0.0), c.artifact_id))
    lines.append(Content.styled("elites (cell length,behaviour)", "bold $text-muted"))
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
    lines = [Content.assemble(("migrations", "bold $text-primary"), f" · every {view.migration_interval} commits"),
             Content.styled(f"next in {view.next_migration_in} commit{'s' if view.next_migration_in != 1 else ''}",
                            "$text-muted")]
    if not groups:
        lines.append(Content.styled("none yet", "$text-muted"))
    order = {key: n for n, key in enumerate(groups)}  # the migrants' commit order
    for (aid, src), targets in sorted(groups.items(), key=lambda kv: (-first[kv[0]], -order[kv[0]])):
        new = first[(aid, src)] > opened_at
        lead = (f"new v{first[(aid, src)]} ", "bold $text-warning") if new else ("", "")
        lines.append(Content.assemble(lead, f"{aid} island {src} → {', '.join(map(str, sorted(targets)))}"))
    return Content("\n").join(lines)
