"""The review queue and the lineage diff show a prompt of named components per component."""

from __future__ import annotations

import time

from engine.components import Component, render
from engine.pipeline.review import PendingReview
from evotui.tui.backend import ArtifactView
from evotui.tui.widgets.diffview import DiffView
from tests.tui.fakes import FrozenBackend, frozen_app

PARENT = render((Component("role", "You are a helpful assistant."),
                 Component("format", "Format the items as a list on one line."),
                 Component("reply", "Reply with the list only.", False)))
CHILD = PARENT.replace("on one line.", "on one line.\nJoin the items with ' ; '.")


class ComponentBackend(FrozenBackend):
    def pending(self) -> list[PendingReview]:
        return [PendingReview("i000040", "evaluate", "a000016", PARENT, CHILD, time.time() - 3)]

    def artifacts(self) -> list[ArtifactView]:
        return [ArtifactView("a000000", None, 1, "seed", 0.03, PARENT),
                ArtifactView("a000005", "a000000", 2, "confirmed", 0.3, CHILD)]


def shown(diff: DiffView) -> str:
    return str(diff.query_one("#diff-body").render()) + str(diff.query_one("#diff-caption").render())


async def test_review_shows_the_changed_component_by_name() -> None:
    app = frozen_app()
    app.backend = ComponentBackend()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        text = shown(app.screen.query_one(DiffView))
        assert "── [format] ──" in text and "+ Join the items with ' ; '." in text
        assert "── [role] ──" not in text and "unchanged: [role], [reply]" in text
        assert "changed [format]" in text and "per component" in text


async def test_lineage_diff_is_per_component() -> None:
    app = frozen_app()
    app.backend = ComponentBackend()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        text = shown(app.screen.query_one(DiffView))
        assert "── [format] ──" in text and "unchanged: [role], [reply]" in text
        await pilot.press("m")  # side by side keeps the headings
        await pilot.pause()
        assert "── [format] ──" in str(app.screen.query_one("#diff-left").render())
