"""Folded diffs (D2, D13): context never runs into the next change, so nothing repeats and the
change count matches the full view; word-level diffs mark pure additions '+' and pure removals '-'."""

from __future__ import annotations

from textual.widgets import Static

from evotui.tui.screens.lineage import DiffScreen
from evotui.tui.widgets.diffrender import render
from evotui.tui.widgets.diffview import DiffView
from tests.tui.fakes import frozen_app

# Three changed lines one unchanged line apart (fewer than the three lines of context), then a
# long unchanged tail.
OLD = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(12)) + "\n"
NEW = OLD.replace("return x + 1\n", "return x * 1\n").replace("return x + 2\n", "return x * 2\n") \
    .replace("return x + 3\n", "return x - 3\n")


def test_context_stops_at_the_next_change() -> None:
    folded = render(OLD, NEW, code=True, split=False, context=3)
    full = render(OLD, NEW, code=True, split=False, context=None)
    assert len(full.changes) == 3
    assert len(folded.changes) == len(full.changes)
    lines = str(folded.left).splitlines()
    body = [ln for ln in lines if "unchanged lines" not in ln]
    assert len(body) == len(set(body)), "a line is shown twice"
    # Every shown line is a line of the full view, in the same order.
    full_lines = str(full.left).splitlines()
    pos = [full_lines.index(ln) for ln in body]
    assert pos == sorted(pos)


def test_pure_addition_in_a_prompt_is_plus_not_tilde() -> None:
    old = "Be brief.\nAnswer in English."
    new = "Be brief.\nAlways cite a source.\nAnswer in English."
    out = str(render(old, new, code=False, split=False, context=None).left).splitlines()
    assert [ln for ln in out if "cite" in ln] == ["  2 + Always cite a source."]
    assert not any("~ " in ln for ln in out)
    gone = str(render(new, old, code=False, split=False, context=None).left).splitlines()
    assert [ln for ln in gone if "cite" in ln] == ["2   - Always cite a source."]
    changed = str(render(old, old.replace("brief", "short"), code=False, split=False, context=None).left)
    assert "~ Be [-brief-]{+short+}." in changed  # a rewrite stays word level


async def test_caption_counts_the_changes_of_the_full_view() -> None:
    app = frozen_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app.push_screen(DiffScreen(OLD, NEW, "test"))
        await pilot.pause()
        diff = app.screen.query_one(DiffView)
        caption = str(diff.query_one("#diff-caption", Static).render())
        assert "3 changes" in caption
        await pilot.press("f")
        await pilot.pause()
        assert "3 changes" in str(diff.query_one("#diff-caption", Static).render())
