"""The header (status line) at every width from the 60-column minimum up: one row, the state,
the simulated banner and the elapsed time apart from each other (the reported overlap read
"RUNNINGSIMULATED x1020261127..."), and a line too long for the width cut with an ellipsis at
the last column (it wrapped, and everything after the wrap was lost)."""

from __future__ import annotations

import re

import pytest

from tests.tui.fakes import FrozenBackend
from tests.tui.fakes_evidence import app_with
from tests.tui.test_dashboard import settle

HEAD = re.compile(r"^■ RUNNING (SIM x400 RO|SIMULATED x400 r20260101-120000-abcd) ")


@pytest.mark.parametrize("width", [60, 80, 100, 120, 149, 150, 160, 200])
async def test_the_header_reads_cleanly_at_every_width(width):
    app = app_with(FrozenBackend())
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        status = app.screen.status_bar
        assert status.region.height == 1 and status.region.width == width
        row = status.render_line(0).text.strip()
        assert HEAD.match(row), row
        assert "RUNNINGSIM" not in row and "x40020" not in row
        full = str(status.render()).strip()
        if len(full) <= width - 2:  # the whole line fits: every field is shown
            assert row == full
        else:  # cut at the last column with an ellipsis, not wrapped onto a hidden second row
            assert row.endswith("…") and len(row) == width - 2 and full.startswith(row[:-1]), row
