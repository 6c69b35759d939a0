"""Pilot tests of the dashboard's tabs and plots, the event log, the read-only view, the status
line and keymap clashes (issue 18 items 1, 2, 5, 6)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Footer, TabbedContent

from engine import events as ev
from evotui.tui.log_lines import event_line
from evotui.tui.keymap import binding_ids
from evotui.tui.settings import UISettingsError, check_keymap
from evotui.tui.widgets.panels import GapsPanel
from evotui.tui.widgets.plots import HistoryPlot
from tests.tui.fakes import FrozenBackend, frozen_app, themed_app
from tests.tui.fakes_evidence import DecidingBackend, app_with

ROOT = Path(__file__).resolve().parents[2]
TABS = ["overview", "scores-tab", "queues-tab", "llm-tab", "budget-tab"]


def shown(widget) -> bool:
    return widget.region.area > 0


async def settle(pilot) -> None:
    await pilot.pause()
    pilot.app.sampler.tick()
    await pilot.pause()


async def test_every_panel_is_reachable_at_80x24_and_plots_draw_only_when_shown():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        tabs = screen.query_one("#dash-tabs", TabbedContent)
        plots = {p.id: p for p in screen.query(HistoryPlot)}
        # At 80x24 the overview folds gaps, budget and LLM away and shows no plots.
        assert not any(shown(screen.query_one(f"#{i}")) for i in ("gaps", "budget", "llm"))
        assert all(p.redraws == 0 for p in plots.values()), {k: p.redraws for k, p in plots.items()}
        seen = {}
        for expected in TABS[1:] + TABS[:1]:
            await pilot.press("right_square_bracket")
            await pilot.pause()
            assert tabs.active == expected
            seen[expected] = sorted(w.id for w in screen.query("#dash-tabs TabPane > *, .plots > *, TabPane Vertical > *")
                                    if shown(w) and w.id)
        assert "plot-scores-scores-tab" in seen["scores-tab"] and "plot-rate-scores-tab" in seen["scores-tab"]
        assert {"gaps-full", "plot-depth-queues-tab", "plot-gaps-queues-tab"} <= set(seen["queues-tab"])
        assert {"llm-full", "plot-calls-llm-tab", "plot-latency-llm-tab"} <= set(seen["llm-tab"])
        assert "budget-full" in seen["budget-tab"]
        drawn = {k: p.redraws for k, p in plots.items()}
        assert all(drawn[f"plot-{kind}-{pane}"] == 1 for pane, kinds in
                   (("scores-tab", ("scores", "rate")), ("queues-tab", ("depth", "gaps")),
                    ("llm-tab", ("calls", "latency")))
                   for kind in kinds), drawn
        assert all(drawn[f"plot-{kind}-overview"] == 0 for kind in ("scores", "rate", "depth")), drawn
        await pilot.press("left_square_bracket")
        assert tabs.active == "budget-tab"
        # Shown again with the same data: no second drawing.
        for _ in range(3):
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert plots["plot-calls-llm-tab"].redraws == 1


async def test_at_160x48_the_overview_shows_every_panel_and_three_plots():
    app = frozen_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = app.screen
        for i in ("queues", "scores", "gaps", "budget", "llm", "log", "overview-plots"):
            assert shown(screen.query_one(f"#{i}")), i
        overview = [screen.query_one(f"#plot-{k}-overview", HistoryPlot) for k in ("scores", "rate", "depth")]
        drawn = [p.redraws for p in overview]
        assert all(n >= 1 for n in drawn)
        for _ in range(5):
            await settle(pilot)
        assert [p.redraws for p in overview] == drawn, "an unchanged frame redrew a plot"


class LinesBackend(FrozenBackend):
    """Frozen frames; poll() returns whatever the test queued."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[str] = []

    def poll(self) -> list[str]:
        out, self.queue = self.queue, []
        return out


async def test_the_log_follows_unless_scrolled_up_and_says_so():
    backend = LinesBackend()
    app = app_with(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        log = app.screen.log_view
        backend.queue = [f"line {i}" for i in range(40)]
        await settle(pilot)
        assert log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y and not log.border_subtitle
        log.add(["burst 1"])  # two writes before the first one's scroll lands: still following
        log.add(["burst 2"])
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y and not log.border_subtitle
        log.scroll_home(animate=False)
        await pilot.pause()
        backend.queue = [f"more {i}" for i in range(5)]
        await settle(pilot)
        assert log.scroll_y == 0, "scrolled up: the view stays where the user put it"
        assert log.border_subtitle == "scrolled up · 5 new below · End follows"
        backend.queue = ["and one"]
        await settle(pilot)
        assert log.border_subtitle.startswith("scrolled up · 6 new")
        await pilot.press("end")
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y and log.border_subtitle == ""
        backend.queue = ["after"]
        await settle(pilot)
        assert log.scroll_y == log.max_scroll_y and log.lines[-1] == "after"
        await pilot.resize_terminal(80, 40)  # a taller log clamps the offset: not a scroll up
        await settle(pilot)
        backend.queue = ["taller"]
        await settle(pilot)
        assert log.following and log.scroll_y == log.max_scroll_y and not log.border_subtitle


def test_log_lines_round_figures_and_say_whether_an_accepted_candidate_is_a_new_best():
    joined = event_line(ev.CandidateAccepted(item_id="i1", artifact_id="a2", parent_id="a1", val_mean=0.123456789,
                                             pool_version=3, best=False))
    best = event_line(ev.CandidateAccepted(item_id="i2", artifact_id="a3", parent_id="a1", val_mean=0.9, pool_version=4,
                                           best=True))
    assert joined is not None and best is not None
    assert "val_mean=0.123 " in joined and "0.1234" not in joined
    assert " candidate_accepted: joined the population item_id=i1 " in joined
    assert " candidate_accepted: NEW BEST item_id=i2 " in best
    assert "best=" not in joined


def footer_text(app) -> str:
    footer = app.screen.query_one(Footer)
    return " ".join(str(k.render()) for k in footer.query("FooterKey"))


async def test_a_read_only_view_offers_no_controls():
    app = frozen_app()  # can_control False, like attach without the control socket
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.check_action("toggle_pause", ()) is False and app.check_action("drain", ()) is False
        text = footer_text(app)
        assert "Pause" not in text and "Drain" not in text and "Wk+" not in text and "Quit" in text
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not any(t.startswith(("Pause", "Admit nothing")) for t in titles)
        await pilot.press("2")
        await settle(pilot)
        assert app.screen.check_action("approve", ()) is False
        assert "Approve" not in footer_text(app) and "Unified/split" in footer_text(app)


async def test_a_controlling_view_offers_them():
    app = app_with(DecidingBackend(2))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.check_action("toggle_pause", ()) is True and "Pause" in footer_text(app)
        await pilot.press("2")
        await settle(pilot)
        assert app.screen.check_action("approve", ()) is True and "Approve" in footer_text(app)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_status_line_shows_speculation(size):
    backend = FrozenBackend()
    app = app_with(backend)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        bar = app.screen.status_bar
        assert "spec off" in str(bar.render())
        backend.snap = replace(backend.snap, speculation=True)
        await settle(pilot)
        assert "spec on" in str(bar.render())


def test_keymap_clashes_are_refused_naming_the_other_binding():
    with pytest.raises(UISettingsError, match=r"'q' for pause clashes with quit \(q\) on the dashboard, review, "
                                              r"lineage, islands, analysis, components and diff screens"):
        check_keymap({"pause": "q"}, binding_ids())
    with pytest.raises(UISettingsError, match=r"'r' for review.approve clashes with review.reject \(r\) on the review"):
        check_keymap({"review.approve": "r"}, binding_ids())
    with pytest.raises(UISettingsError, match=r"'ctrl\+p' for pause clashes with the command palette"):
        check_keymap({"pause": "ctrl+p"}, binding_ids())
    check_keymap({"pause": "q", "quit": "space"}, binding_ids())  # a swap is fine
    check_keymap({"review.approve": "m"} | {"diff.mode": "v"}, binding_ids())


def test_the_cli_refuses_a_clashing_keymap_before_taking_the_terminal(tmp_path):
    ui = tmp_path / "ui.toml"
    ui.write_text('[keymap]\npause = "p"\n')
    proc = subprocess.run([sys.executable, "-m", "evotui.cli", "attach", "--db", str(tmp_path / "x.db"),
                           "--ui-config", str(ui)], check=False, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert "keymap clash: 'p' for pause clashes with policy (p)" in proc.stderr


EXIT_WITH_CLIENT = """
import asyncio, sys
from pathlib import Path
from engine.run.runner import EngineRun
from evotui.control import ControlClient, ControlServer, socket_path

async def main(db):
    run = await EngineRun.create("rules", [("t", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 3}})], db)
    server = ControlServer(run, socket_path(db, run.ctx.run_id))
    assert await server.start()
    client = ControlClient(socket_path(db, run.ctx.run_id))
    assert await client.connect()
    await client.request("snapshot")
    await run.run()
    await server.close()
    assert client.connected
    print("closed with a client connected")

asyncio.run(main(Path(sys.argv[1])))
"""


def test_no_traceback_when_a_client_is_connected_at_exit(tmp_path):
    proc = subprocess.run([sys.executable, "-c", EXIT_WITH_CLIENT, str(tmp_path / "r.db")], check=False, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "closed with a client connected" in proc.stdout
    assert "Traceback" not in proc.stderr and "CancelledError" not in proc.stderr, proc.stderr


async def test_attached_plots_show_the_stored_history(tmp_path):
    """A finished run in the database: attach's Scores and LLM tabs plot what SQLite holds."""
    from engine.run.runner import EngineRun
    from evotui.headless import drive
    from evotui.tui.app import EvoApp
    from evotui.tui.attach import AttachBackend

    db = tmp_path / "r.db"
    run = await EngineRun.create("rules", [("t", {"sim": {"time_scale": 400}, "budget": {"max_proposals": 8}})], db)
    await drive(run, events_path=None, progress_every=60.0, quiet=True)
    backend = AttachBackend(db, None)
    await backend.start()
    app = EvoApp(backend)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("right_square_bracket")
            await settle(pilot)
            scores = app.screen.query_one("#plot-scores-scores-tab", HistoryPlot)
            assert scores.redraws >= 1
            text = scores.render().plain
            assert "best" in text and "mean" in text and "sim min" in text and "score" in text
            for _ in range(2):
                await pilot.press("right_square_bracket")
            await settle(pilot)
            latency = app.screen.query_one("#plot-latency-llm-tab", HistoryPlot).render().plain
            assert "p50 sim s" in latency and "p95 sim s" in latency
            assert backend.frame().history.calls, "the history was read from the database"
    finally:
        await backend.close()


async def test_a_theme_switch_redraws_the_shown_plots_in_its_colours():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for key in ["right_square_bracket"] * 3 + ["left_square_bracket"] * 2:  # LLM drawn, then Scores
            await pilot.press(key)
            await settle(pilot)
        shown_plot = app.screen.query_one("#plot-scores-scores-tab", HistoryPlot)
        hidden_plot = app.screen.query_one("#plot-calls-llm-tab", HistoryPlot)
        before = (shown_plot.redraws, hidden_plot.redraws)
        assert before[1] == 1
        dark = shown_plot._colour(0)
        app.theme = "evotui-light"
        await settle(pilot)
        assert shown_plot.redraws == before[0] + 1 and hidden_plot.redraws == before[1]
        assert shown_plot._colour(0) != dark
        for _ in range(2):  # shown again with unchanged data: drawn anew, in the new colours
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert hidden_plot.redraws == before[1] + 1


async def test_streaming_data_redraws_a_plot_at_most_every_half_second(monkeypatch):
    from evotui.tui.widgets import plots

    now = [1000.0]
    monkeypatch.setattr(plots, "clock", lambda: now[0])
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        plot = app.screen.query_one("#plot-scores-scores-tab", HistoryPlot)
        history, rev = app.sampler.frame.history, app.sampler.frame.history_rev
        drawn = plot.redraws
        for step in (1, 2, 3):  # data moves on within the interval: nothing drawn yet, one timer set
            now[0] += 0.1
            plot.show(history, rev + step, 1.5)
        assert plot.redraws == drawn and plot._pending is not None
        now[0] += plots.MIN_INTERVAL
        plot._timed_redraw()  # what the timer does when the interval is over: the latest data
        assert plot.redraws == drawn + 1 and plot._drawn == (rev + 3, 1.5)


async def test_the_llm_tab_shows_what_a_proposal_costs_per_stage() -> None:
    """Issue 13 item 7: calls and tokens per proposal by stage (a strategy's agents included) on the
    LLM tab, the total on the overview; nothing from a driver too old to send them."""
    app = frozen_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        full = str(app.screen.query_one("#llm-full").render())
        assert "reflect        1.05    3,227" in full and "rollout       27.73   33,955" in full
        assert "all stages: 28.77 calls · 37,182 tokens" in full and "(22 proposals)" in full
        small = str(app.screen.query_one("#llm").render())
        assert "per proposal 28.77 calls · 37,182 tokens" in small and "rollout" not in small.split("per proposal")[-1]
    from evotui.tui.widgets.panels import per_proposal_lines
    older = replace(FrozenBackend().snap, calls_by_stage={}, tokens_by_stage={})
    assert per_proposal_lines(older, by_stage=True) == []


async def test_a_chain_run_shows_its_chain_count_and_chain_events_apart_from_decisions() -> None:
    """Mode chain: the gaps panel says how many chains run against the count and its bounds, and
    lists the chains' own events (collisions, retirements) on their own line, not as decisions."""
    backend = FrozenBackend()
    backend.snap = replace(backend.snap, mode="chain", chain_count=7, chains_min=6, chains_max=10, chains_running=6,
                           staleness={"pass": 12, "chain_unjoinable": 3, "chain_retired": 1})
    app = themed_app(backend)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        text = str(app.screen.query_one("#gaps").render())
        assert "chains 6 running · count 7 (adapts 6-10)" in text
        assert "chain events: retired 1 unjoinable 3" in text
        assert "decisions: pass 12 · discarded 1" in text
    fixed = replace(backend.snap, chain_count=8, chains_min=8, chains_max=8, staleness={"pass": 2})
    frame = replace(backend.frame(), snap=fixed)

    def gaps(snap) -> str:  # the panel's text without its markup
        return re.sub(r"\[[^\]]*\]", "", GapsPanel().text(replace(frame, snap=snap)))
    assert "chains 6 running · count 8 (fixed)" in gaps(fixed)
    assert "chains" not in gaps(replace(fixed, mode="async", chains_min=0, chains_max=0))
    assert "chains count 8 (fixed)" in gaps(replace(fixed, stages=()))  # attached: nothing known to run
