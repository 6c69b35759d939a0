"""The islands of a loongflow run (or contextevolve with island selection): each island's size,
best and Boltzmann temperature in a table, the selected island's MAP-Elites grid as a heat map,
and the migrations between islands as they happen. The data is a read-only view the backend
rebuilds when the pool changes (engine/strategy/islands_view.py)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Static

from engine.strategy.islands_view import IslandsView
from evotui.tui.backend import Frame
from evotui.tui.keymap import ISLANDS_BINDINGS
from evotui.tui.screens.base import EvoScreen
from evotui.tui.widgets.islands import grid_size, heat_map, migrations_text
from evotui.tui.widgets.panels import fmt

COLUMNS = ("island", "size", "best", "score", "τ", "stagnant", "cells")


def _cells(island, view: IslandsView) -> int:
    cols, rows = grid_size(island, view.axes)
    return cols * rows


class IslandsScreen(EvoScreen):
    BINDINGS = ISLANDS_BINDINGS
    HELP = """\
## Islands
The run's island ring (loongflow; contextevolve with `selection = "islands"`). The table lists
each island's members (seed and migrants included), its best, its adaptive Boltzmann
temperature τ (higher: flatter parent choice), commits since its best last rose and its occupied
MAP-Elites cells. Below: the selected island's grid, text length across and novelty (programs)
or coverage (per-example scores) up, or the axes the task declares (`[[descriptor]]` in
task.toml), each occupied cell with its elite's score, shaded from the island's lowest to its
highest (the best in bold); beside it the migrations, newest first, those seen while this
screen was open marked `new` with the pool version, and under them each migration the run
recorded: its pool version, the islands, what triggered it (the two islands' diversity against
the threshold, or the interval) and the migrants. **]** / **[** or the arrow keys select an island.
"""

    def __init__(self) -> None:
        super().__init__()
        self.view: IslandsView | None = None
        self.selected_island = 0
        self._seen_at: dict[tuple[str, int, int], int] = {}
        """Pool version each migration was first seen at (the screen's own record)."""
        self._opened_at: int | None = None
        self._shown: tuple | None = None

    def body(self) -> ComposeResult:
        table: DataTable = DataTable(id="islands-table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        with Horizontal(id="islands-lower"):
            with VerticalScroll(id="island-grid-box"):
                yield Static("", id="island-grid")
            with VerticalScroll(id="migrations-box"):
                yield Static("", id="migrations")

    def refresh_body(self, frame: Frame, app) -> None:
        view = app.backend.islands()
        version = frame.snap.pool_version
        if view is None:
            self.query_one("#island-grid", Static).update("This run's strategy keeps no islands "
                                                          "(loongflow, or contextevolve with island selection).")
            return
        if self._opened_at is None:
            self._opened_at = version
        if view is self.view:
            return
        for m in view.migrations:
            self._seen_at.setdefault((m.artifact_id, m.from_island, m.to_island), version)
        self.view = view
        table = self.query_one("#islands-table", DataTable)
        rows = [(str(i.index), str(i.size), i.best_id or "-", fmt(i.best_score), f"{i.temperature:.2f}",
                 str(i.stagnant_for), f"{len(i.cells)}/{_cells(i, view)}") for i in view.islands]
        if table.row_count != len(rows):
            table.clear()
            for n, row in enumerate(rows):
                table.add_row(*row, key=str(n))
        else:
            for n, row in enumerate(rows):
                for col, value in zip(table.columns, row):
                    table.update_cell(str(n), col, value)
        self.selected_island = min(self.selected_island, len(view.islands) - 1)
        if table.cursor_row != self.selected_island:
            table.move_cursor(row=self.selected_island)
        self.show_island()

    def show_island(self) -> None:
        view = self.view
        if view is None or not view.islands:
            return
        island = view.islands[self.selected_island]
        shown = (island, view.feature, view.migrations, view.folded, tuple(sorted(self._seen_at.items())))
        if shown == self._shown:
            return
        self._shown = shown
        self.query_one("#island-grid", Static).update(heat_map(island, view.feature, view.axes))
        self.query_one("#migrations", Static).update(
            migrations_text(view, self._seen_at, self._opened_at or 0))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if self.view is not None and 0 <= event.cursor_row < len(self.view.islands):
            self.selected_island = event.cursor_row
            self.show_island()

    def action_island(self, step: int) -> None:
        if self.view is None or not self.view.islands:
            return
        self.selected_island = (self.selected_island + step) % len(self.view.islands)
        self.query_one("#islands-table", DataTable).move_cursor(row=self.selected_island)
        self.show_island()
