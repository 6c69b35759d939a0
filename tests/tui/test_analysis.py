"""The analysis screen: engine/run/analysis.py on a hand-made lineage and on a real run's
database, and the screen over it (frozen data; the worker, r, the live refresh, a failure)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.run.analysis import analyze_run, recycled_lines
from engine.run.runner import EngineRun
from evotui.tui.app import EvoApp
from evotui.tui.backend import BackendError
from evotui.tui.screens import analysis as analysis_screen
from evotui.tui.screens.analysis import AnalysisScreen
from evotui.tui.widgets.analysis import AnalysisPlot
from tests.tui.fakes import themed_app
from tests.tui.fakes_analysis import STEPS, AnalysisBackend, CyclingBackend, frozen_analysis, open_analysis


def test_figures_of_the_hand_made_lineage():
    a = frozen_analysis()
    assert [s.candidate_id for s in a.timeline] == ["s", "a", "c", "e"] and a.best_id == "e"
    assert (a.recycled_lines, a.added_lines, a.recycle_rate) == (3, 7, 0.4286)
    assert dict(a.by_class) == {"literal": 1, "tuning": 1, "trivial": 1}
    assert (a.edits_labelled, a.edits_total) == (5, 6)
    counts = {t.label: t.edits for t in a.edit_types}
    assert counts["hyperparameter_tuning"] == 3 and counts["composition"] == 1 and counts["bug_fix"] == 0


def test_recycled_lines_of_one_artifact():
    text = {cid: src for cid, _, src, _ in STEPS}
    parent = {cid: p for cid, p, _, _ in STEPS}
    assert recycled_lines(text.get, parent.get, "b") == {"# tuned by hand": "trivial"}
    assert recycled_lines(text.get, parent.get, "c") == {"rate = 0.99992": "literal"}
    assert recycled_lines(text.get, parent.get, "d") == {"rate = 0.5": "tuning"}
    assert recycled_lines(text.get, parent.get, "x") == {}  # a's deletion is not x's lineage
    assert recycled_lines(text.get, parent.get, "s") == {}


async def test_analyze_a_finished_runs_database(tmp_path: Path):
    db = tmp_path / "run.db"
    run = await EngineRun.create("rules", [("test", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 6}})], db)
    await run.run()
    a = await analyze_run(db, run.ctx.run_id)
    assert a.run_id == run.ctx.run_id and a.proposals >= 1
    assert a.timeline and a.timeline[0].proposal == 0
    assert a.edits_labelled == 0 and a.edit_types == ()  # no `evotui analyze` ran: nothing cached


async def _open(pilot) -> AnalysisScreen:
    screen = await open_analysis(pilot)
    assert isinstance(screen, AnalysisScreen)
    return screen


async def test_key_opens_the_analysis_and_r_analyses_again():
    backend = AnalysisBackend()
    app = themed_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _open(pilot)
        summary = str(screen.query_one("#analysis-summary").render())
        assert "42.9% of 7 added lines" in summary and "5 of 6 edits" in summary
        assert all(p.analysis is screen.analysis and p.draws >= 1 for p in screen.query(AnalysisPlot))
        assert "hyperparameter tuning" in str(screen.query_one("#analysis-odds").render())
        assert backend.analysis_calls == 1
        pilot.app.sampler.tick()  # same pool version: no new analysis
        await pilot.pause()
        assert backend.analysis_calls == 1
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert backend.analysis_calls == 2 and screen.analyses == 2
        assert any(c.title.startswith("Analyse the run") for c in app.get_system_commands(screen))


async def test_a_live_run_is_analysed_again_when_the_pool_moved(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(analysis_screen, "clock", lambda: now[0])
    backend = AnalysisBackend()
    app = themed_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(pilot)
        backend.snap = replace(backend.snap, pool_version=backend.snap.pool_version + 1)
        pilot.app.sampler.tick()
        await app.workers.wait_for_complete()
        assert backend.analysis_calls == 1  # too soon after the last one
        screen = app.screen
        assert screen.retry_timer is not None  # comes back once the interval is over
        now[0] += analysis_screen.REFRESH_S
        backend.snap = replace(backend.snap, pool_version=backend.snap.pool_version + 1)
        pilot.app.sampler.tick()
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert backend.analysis_calls == 2 and screen.retry_timer is None
        backend.snap = replace(backend.snap, pool_version=backend.snap.pool_version + 1)
        live_frame = backend.frame
        backend.frame = lambda: replace(live_frame(), finished="completed")  # not re-analysed by itself
        now[0] += analysis_screen.REFRESH_S
        pilot.app.sampler.tick()
        await pilot.pause()
        await app.workers.wait_for_complete()
        assert backend.analysis_calls == 2


class FailingBackend(AnalysisBackend):
    async def analysis(self):
        raise BackendError("cannot analyse r1: no run 'r1'")


async def test_a_failed_analysis_is_shown():
    app = themed_app(FailingBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(pilot)
        await pilot.pause()
        assert "analysis failed: cannot analyse r1" in str(screen.query_one("#analysis-summary").render())


async def test_lineage_names_the_recycled_lines_of_a_program():
    app = themed_app(CyclingBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.sampler.tick()
        await pilot.press("3")
        await pilot.pause()
        app.sampler.tick()
        await pilot.pause()
        screen = app.screen
        tree = screen.query_one("#tree")
        for cid, expected in [("c", "literal `rate = 0.99992`"), ("b", "trivial `# tuned by hand`")]:
            tree.move_cursor(screen._tree_nodes[cid])
            await pilot.pause()
            info = str(screen.query_one("#artifact-info").render())
            assert "1 added line its lineage deleted before" in info and expected in info
            assert "↺" in str(screen.query_one("#diff-body").render())  # marked in the diff too
        tree.move_cursor(screen._tree_nodes["x"])
        await pilot.pause()
        assert "recycled" not in str(screen.query_one("#artifact-info").render())
        assert "↺" not in str(screen.query_one("#diff-body").render())


def test_recycled_added_lines_are_marked_in_code_diffs():
    from evotui.tui.widgets.diffrender import render

    old, new = STEPS[2][2], STEPS[3][2]  # b -> c brings `rate = 0.99992` back
    recycled = frozenset({"rate = 0.99992"})
    unified = str(render(old, new, code=True, split=False, context=3, recycled=recycled).left)
    assert "  2 ↺     rate = 0.99992" in unified and "2   -     rate = 0.99988" in unified
    split = str(render(old, new, code=True, split=True, context=3, recycled=recycled).right)
    assert "2 ↺     rate = 0.99992" in split
    plain = str(render(old, new, code=True, split=False, context=3).left)
    assert "↺" not in plain and "+     rate = 0.99992" in plain


async def test_a_live_runs_analysis_reads_its_database(tmp_path: Path):
    from evotui.tui.backend import LiveBackend

    db = tmp_path / "run.db"
    run = await EngineRun.create("rules", [("test", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 6}})], db)
    app = EvoApp(LiveBackend(run), engine=run.run)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.engine_worker.wait()
        screen = await _open(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.error == "" and screen.analysis is not None
        assert screen.analysis.run_id == run.ctx.run_id and screen.analysis.proposals >= 1
        assert f"in {screen.analysis.proposals} proposals" in str(screen.query_one("#analysis-summary").render())


class BrokenBackend(AnalysisBackend):
    async def analysis(self):
        raise RuntimeError("database vanished")


async def test_an_unexpected_failure_ends_the_analysis_and_says_why():
    app = themed_app(BrokenBackend())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(pilot)
        await pilot.pause()
        assert not screen.running
        assert "database vanished" in str(screen.query_one("#analysis-summary").render())
