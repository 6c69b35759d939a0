"""Diffs for reading: folded hunks with context, line numbers, next / previous change, and side
by side without wrapping."""

from __future__ import annotations

from textual.widgets import Static

from evotui.tui.screens.lineage import DiffScreen
from evotui.tui.widgets.diffrender import fold, render
from evotui.tui.widgets.diffview import DiffView
from tests.tui.fakes import frozen_app

OLD = "\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(60))
NEW = OLD.replace("return x + 5\n", "return x * 5\n").replace("return x + 30\n", "return x - 30\n") \
    .replace("return x + 55\n", "return x // 55  # " + "very long comment " * 12 + "\n")


def body(diff: DiffView) -> str:
    return str(diff.query_one("#diff-body", Static).render())


async def open_diff(pilot, old: str = OLD, new: str = NEW) -> DiffView:
    await pilot.pause()
    pilot.app.push_screen(DiffScreen(old, new, "test"))
    await pilot.pause()
    return pilot.app.screen.query_one(DiffView)


def test_fold_keeps_context_and_counts_what_it_hides() -> None:
    out = render(OLD, NEW, code=True, split=False, context=3)
    full = render(OLD, NEW, code=True, split=False, context=None)
    assert len(out.changes) == len(full.changes) == 3 and out.hidden > 100 and full.hidden == 0
    lines = str(out.left).splitlines()
    assert sum("unchanged lines" in ln for ln in lines) == 4
    first = out.changes[0]
    assert all("unchanged" not in ln for ln in lines[first - 3:first])  # three lines of context
    assert fold([], 3) == ([], 0)


async def test_folded_by_default_with_line_numbers_and_full_on_f() -> None:
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        diff = await open_diff(pilot)
        text = body(diff)
        assert "unchanged lines (f: full file)" in text
        assert " 17     - " in text and "     17 + " in text  # old and new line numbers
        assert "  1   1" not in text  # the file's head is folded away
        await pilot.press("f")
        await pilot.pause()
        assert not diff.folded and "unchanged lines" not in body(diff) and "  1   1" in body(diff)
        assert "full" in str(diff.query_one("#diff-caption", Static).render())


async def test_next_and_previous_change_scroll_the_diff() -> None:
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        diff = await open_diff(pilot)
        await pilot.press("f")  # the full file: the changes are screens apart
        await pilot.pause()
        scroller = diff.scroller
        assert scroller.scroll_y == 0
        seen = []
        for _ in range(3):
            await pilot.press("n")
            await pilot.pause()
            seen.append(scroller.scroll_y)
        assert seen[0] > 0 and seen[0] < seen[1] and diff.change_index == 2
        assert "change 3/3" in str(diff.query_one("#diff-caption", Static).render())
        await pilot.press("N")
        await pilot.pause()
        assert scroller.scroll_y == seen[1] and diff.change_index == 1


async def test_side_by_side_does_not_wrap() -> None:
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        diff = await open_diff(pilot)
        await pilot.press("m")
        await pilot.pause()
        left, right = diff.query_one("#diff-left", Static), diff.query_one("#diff-right", Static)
        rows = len(str(right.render()).splitlines())
        assert left.size.height == right.size.height == rows  # one screen row per diff row
        assert right.size.width < 40  # the long comment is cut, not wrapped
        await pilot.press("n")
        await pilot.pause()
        assert diff.change_index == 0
