"""Review with evidence: scores, staleness and notes beside the diff; the cursor stays in place
after a decision; ages move. Lineage: starts on the best, highlights its path, shows notes,
tags and (programs) why an artifact is in the population."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from evotui.tui.screens import review
from evotui.tui.screens.lineage import LineageTree
from tests.tui.fakes_evidence import DecidingBackend, EvidenceBackend, ProgramBackend, app_with


def plain(widget: Static) -> str:
    return str(widget.render())


async def test_review_shows_scores_staleness_and_notes() -> None:
    app = app_with(EvidenceBackend())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        text = plain(app.screen.query_one("#evidence", Static))
        assert "child 0.750 vs parent 0.500 (+0.250) on 4 examples" in text
        assert "best a000016 0.539" in text and "parent a000016 0.539" in text
        assert "evaluate gap 1 -> pass: gap 1 <= max gap 2" in text
        assert "island=2" in text and "Ask for lower case" in text and "kept the ' ; ' rule" in text
        await pilot.press("down")
        await pilot.pause()
        text = plain(app.screen.query_one("#evidence", Static))
        assert "the strategy wrote no guidance" in text and "propose gap 0" in text


async def test_cursor_stays_in_place_after_decisions() -> None:
    backend = DecidingBackend(5)
    app = app_with(backend)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        screen = app.screen
        table = screen.query_one(DataTable)
        await pilot.press("down", "down")
        assert screen.selected_id() == "i000042"
        await pilot.press("a")  # approved: the next item takes its row
        await pilot.pause()
        assert [p.item_id for p in backend.items] == ["i000040", "i000041", "i000043", "i000044"]
        assert table.cursor_row == 2 and screen.selected_id() == "i000043"
        await pilot.press("s")  # skipped to the back: the next one is selected
        await pilot.pause()
        assert table.cursor_row == 2 and screen.selected_id() == "i000044"
        await pilot.press("down")
        await pilot.press("a")  # the last row: the cursor stays on the new last row
        await pilot.pause()
        assert screen.selected_id() == "i000044" and table.cursor_row == 2
        await pilot.press("up", "r")  # reject with a reason: the next row moves up into place
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert [p.item_id for p in backend.items] == ["i000040", "i000044"]
        assert table.cursor_row == 1 and screen.selected_id() == "i000044"


async def test_ages_are_live(monkeypatch) -> None:
    backend = DecidingBackend(2)
    now = [backend.items[0].parked_at + 5]
    monkeypatch.setattr(review, "clock", lambda: now[0])
    app = app_with(backend)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        screen = app.screen
        assert screen._ages(screen.query_one(DataTable)) == ["5s", "15s"]
        now[0] += 130
        screen.sync_pending()  # what the one-second timer does
        await pilot.pause()
        assert screen._ages(screen.query_one(DataTable)) == ["2m15s", "2m25s"]


async def test_lineage_starts_on_the_best_with_its_notes_and_path() -> None:
    app = app_with(EvidenceBackend())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        tree = screen.query_one(LineageTree)
        assert tree.cursor_node is not None and tree.cursor_node.data.artifact_id == "a000016"
        assert tree.path == {"a000016", "a000004", "a000000"}
        assert str(tree.cursor_node.label).startswith("★")
        info = plain(screen.query_one("#artifact-info", Static))
        assert "★ best" in info and "island=2" in info
        notes = plain(screen.query_one("#lineage-notes", Static))  # in full beside the diff
        assert "plan" in notes and "Ask for lower case" in notes
        footer = {b.key: b for _, b, enabled, _ in screen.active_bindings.values() if enabled}
        assert footer["enter"].description == "Diff" and footer["enter"].show
        await pilot.press("up")  # another artifact: its own panel and diff
        await pilot.pause()
        assert "a000016" not in plain(screen.query_one("#artifact-info", Static)).splitlines()[0]
        await pilot.press("b")
        await pilot.pause()
        assert tree.cursor_node.data.artifact_id == "a000016"
        await pilot.press("enter")
        await pilot.pause()
        assert "Ask for lower case" in plain(app.screen.query_one("#diff-info", Static))


async def test_lineage_explains_program_acceptance() -> None:
    app = app_with(ProgramBackend())
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        tree = screen.query_one(LineageTree)
        assert "new best" in plain(screen.query_one("#artifact-info", Static))
        labels = {a: str(n.label) for a, n in screen._tree_nodes.items()}
        assert "accepted, new best" in labels["a000016"] and labels["a000003"].endswith("accepted")
        tree.move_cursor(screen._tree_nodes["a000003"])
        await pilot.pause()
        info = plain(screen.query_one("#artifact-info", Static))
        assert "accepted into the population (it ran and was scored), not a new best" in info
        assert "0.000 <= best 0.200" in info


async def test_live_backend_reads_the_parked_items_evidence(tmp_path) -> None:
    import asyncio

    from engine.run.runner import EngineRun
    from evotui.tui.backend import LiveBackend

    layer = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 6}, "pipeline": {"review_before_evaluate": True}}
    run = await EngineRun.create("rules", [("test", layer)], tmp_path / "e.db")
    backend = LiveBackend(run)
    task = asyncio.create_task(run.run())
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 15
        while not backend.pending():
            assert loop.time() < end, "nothing parked in time"
            await asyncio.sleep(0.02)
        backend.poll()
        item = backend.pending()[0]
        ev = backend.evidence(item.item_id)
        assert ev is not None and ev.parent_mb and not ev.child_mb  # held before evaluation
        assert ev.parent_score is not None and "propose" in ev.gaps
        assert any(line.startswith("propose gap") for line in ev.staleness)
        assert backend.evidence("i999999") is None
    finally:
        await backend.control("stop")
        await asyncio.wait_for(task, 15)
