"""The lineage screen's notes panel: the selected artifact's strategy notes in full beside its
diff (loongflow's plan and summary; contextevolve's summary, guidance and exemplars)."""

from __future__ import annotations

from evotui.tui.backend import ArtifactView
from evotui.tui.widgets.evidence import strategy_notes
from tests.tui.fakes import FrozenBackend, themed_app
from tests.tui.fakes_islands import CONTEXT_NOTES, ContextEvolveBackend, IslandsBackend


async def _lineage(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.press("3")
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


def test_notes_in_reading_order_without_bookkeeping():
    a = ArtifactView("a1", None, 1, "confirmed", 0.5, "x", meta={"notes": CONTEXT_NOTES})
    assert list(strategy_notes(a.meta)) == ["summary", "guidance", "exemplars"]
    assert strategy_notes({"notes": {"summary": "s", "plan": "p", "extra": " "}}) == {"plan": "p", "summary": "s"}
    assert strategy_notes({}) == {} and strategy_notes({"notes": "not a mapping"}) == {}


async def test_contextevolve_notes_beside_the_diff_and_o_hides_them():
    app = themed_app(ContextEvolveBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await _lineage(pilot)
        screen = app.screen
        assert screen.selected().artifact_id == "a000016"
        box = screen.query_one("#lineage-notes-box")
        assert box.display and screen.has_class("-notes")
        panel = str(screen.query_one("#lineage-notes").render())
        assert "NEW: joins the items" in panel and "PRESERVES: the single-line" in panel
        assert "guidance" in panel and "- a000011 (score 0.101)" in panel and "guidance_version" not in panel
        info = str(screen.query_one("#artifact-info").render())
        assert "NEW:" not in info  # not twice
        await pilot.press("o")
        await pilot.pause()
        assert not box.display and not screen.has_class("-notes")
        assert "summary" in str(screen.query_one("#artifact-info").render())  # clipped, above the diff
        await pilot.press("o")
        await pilot.pause()
        assert box.display


async def test_loongflow_plan_and_summary_follow_the_selection():
    app = themed_app(IslandsBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        await _lineage(pilot)
        screen = app.screen
        panel = str(screen.query_one("#lineage-notes").render())
        assert "plan" in panel and "(attempt 14)" in panel and "raised the score to 0.74" in panel
        await pilot.press("up")
        await pilot.pause()
        assert screen.selected().artifact_id != "a000014"
        assert f"(attempt {int(screen.selected().artifact_id[1:])})" in str(screen.query_one("#lineage-notes").render())


async def test_no_panel_without_notes():
    app = themed_app(FrozenBackend())
    async with app.run_test(size=(120, 36)) as pilot:
        await _lineage(pilot)
        assert not app.screen.query_one("#lineage-notes-box").display
        assert "none from the strategy" in str(app.screen.query_one("#artifact-info").render())
