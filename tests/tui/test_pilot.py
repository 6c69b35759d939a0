"""Pilot tests on a live engine (simulated backend): every binding, state changes, and review
decisions persisted in the reviews table."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from engine.store.store import Store
from evotui.tui.app import EvoApp
from evotui.tui.backend import LiveBackend
from evotui.tui.screens.base import ConfirmScreen, ReasonScreen
from evotui.tui.screens.lineage import DiffScreen
from evotui.tui.settings import UISettings

LAYER = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 40},
         "pipeline": {"mode": "async", "review_before_evaluate": True}}
"""Mode async: every binding works there (mode chain refuses policy switches, tested below)."""


async def live_app(db: Path, **settings) -> tuple[EvoApp, EngineRun]:
    run = await EngineRun.create("rules", [("test", LAYER)], db)
    return EvoApp(LiveBackend(run), engine=run.run, settings=UISettings(**settings)), run


async def until(pilot, predicate, timeout: float = 15.0, msg=lambda: "") -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, f"condition not reached in time {msg()}"
        await pilot.pause(0.05)


def editor(tmp_path: Path, body: str, status: int = 0) -> str:
    script = tmp_path / f"ed{status}{len(body)}.sh"
    script.write_text(f"#!/bin/sh\nprintf '%s' '{body}' > \"$1\"\nexit {status}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def messages(app: EvoApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_every_binding_and_persisted_reviews(tmp_path, monkeypatch):
    db = tmp_path / "runs.db"
    app, run = await live_app(db)
    monkeypatch.setenv("EDITOR", editor(tmp_path, "An edited prompt."))
    monkeypatch.delenv("VISUAL", raising=False)
    orch = run.orchestrator
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await until(pilot, lambda: len(run.review.pending()) >= 4)
        await pilot.press("space")
        assert run.snapshot().state == "paused"
        await pilot.press("space")
        assert run.snapshot().state == "running"
        await pilot.press("w")
        assert app.selected_stage == "rollout"
        before = orch.stages["rollout"].target_workers
        await pilot.press("plus")
        assert orch.stages["rollout"].target_workers == before + 1
        await pilot.press("minus")
        assert orch.stages["rollout"].target_workers == before
        await pilot.press("p")
        assert run.snapshot().policy == "guarded"
        await pilot.press("p")
        assert run.snapshot().policy == "reflective"
        await pilot.press("p")
        assert run.snapshot().policy == "full"
        await pilot.press("C")
        assert run.review.enabled["update"] is True
        await pilot.press("C")
        assert run.review.enabled["update"] is False
        await pilot.press("x")
        assert run.snapshot().speculation is True
        await pilot.press("x")
        assert run.snapshot().speculation is False

        await pilot.press("2")
        await until(pilot, lambda: app.screen.query("#pending") and app.screen.selected_id() is not None)
        screen = app.screen
        first = screen.selected_id()
        await pilot.press("a")
        assert first not in {p.item_id for p in run.review.pending()}
        await until(pilot, lambda: screen.selected_id() not in (None, first))
        rejected = screen.selected_id()
        await pilot.press("r")
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press(*"too long", "enter")
        assert rejected not in {p.item_id for p in run.review.pending()}
        await until(pilot, lambda: screen.selected_id() not in (None, first, rejected))
        skipped = screen.selected_id()
        await pilot.press("s")
        await until(pilot, lambda: screen.selected_id() not in (None, skipped))
        edited = screen.selected_id()
        await pilot.press("e")
        await until(pilot, lambda: edited not in {p.item_id for p in run.review.pending()})
        await pilot.press("m")
        await pilot.press("A")
        assert run.review.pending() == [] or all(p.parked_at > 0 for p in run.review.pending())

        await pilot.press("3")
        await until(pilot, lambda: len(app.backend.artifacts()) > 1, msg=lambda: (run.snapshot(), run.review.pending()))
        await pilot.pause(0.3)
        await pilot.press("enter")  # the selection starts on the best, which has text
        assert isinstance(app.screen, DiffScreen)
        await pilot.press("m", "escape")
        await pilot.press("y", "Y")
        assert any(m.startswith("Copied") for m in messages(app))
        await pilot.press("f1")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("f1")
        assert type(app.screen).__name__ != "HelpScreen"
        await pilot.press("1")
        assert app.current_mode == "dashboard"
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert run.snapshot().state != "draining"
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: app.engine_task.done())
    result = app.engine_task.result()
    assert result.status in ("interrupted", "completed")
    async with await Store.open(db, create=False, readonly=True) as store:
        rows = await store.fetch_rows("reviews", run.ctx.run_id)
    by_item = {r["item_id"]: r for r in rows}
    assert by_item[first]["decision"] == "approve"
    assert by_item[rejected]["decision"] == "reject" and by_item[rejected]["reason"] == "too long"
    assert by_item[edited]["decision"] == "edit" and by_item[edited]["edited"] == 1


@pytest.mark.parametrize("case", ["unset", "fails", "empty"])
async def test_editor_problems_leave_the_item_waiting(tmp_path, monkeypatch, case):
    app, run = await live_app(tmp_path / "runs.db")
    monkeypatch.delenv("VISUAL", raising=False)
    if case == "unset":
        monkeypatch.delenv("EDITOR", raising=False)
    else:
        monkeypatch.setenv("EDITOR", editor(tmp_path, "" if case == "empty" else "x", 3 if case == "fails" else 0))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: len(run.review.pending()) >= 1)
        await pilot.press("2")
        await until(pilot, lambda: app.screen.query("#pending") and app.screen.selected_id() is not None)
        item = app.screen.selected_id()
        await pilot.press("e")
        expected = {"unset": "$EDITOR is not set", "fails": "exited with status 3", "empty": "edited text is empty"}[case]
        await until(pilot, lambda: any(expected in m for m in messages(app)), msg=lambda: str(messages(app)))
        assert item in {p.item_id for p in run.review.pending()}
        run.stop("test over")
        await until(pilot, lambda: app.engine_task.done())


async def test_a_chain_run_in_the_tui_refuses_policy_switches_with_a_notice(tmp_path):
    layer = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 6}, "pipeline": {"mode": "chain", "chains": 2}}
    run = await EngineRun.create("rules", [("test", layer)], tmp_path / "runs.db")
    app = EvoApp(LiveBackend(run), engine=run.run, settings=UISettings())
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await until(pilot, lambda: run.snapshot().proposal_attempts >= 1)
        await pilot.press("p")
        await until(pilot, lambda: any("mode chain" in m for m in messages(app)), msg=lambda: messages(app))
        assert run.snapshot().policy == "full"
        await until(pilot, lambda: app.engine_task.done(), timeout=60)
    result = app.engine_task.result()
    assert result.status == "completed" and result.summary["mode"] == "chain"
    assert result.summary["proposal_attempts"] == 6
