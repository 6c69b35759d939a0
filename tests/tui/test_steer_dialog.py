"""The steering dialog (g) on a live run: guidance typed in the TUI reaches exactly N stored
proposer requests and is an audited row by "tui"; a refusal is an error notice; the candidate
field starts on lineage's highlighted artifact; a read-only view does not offer the dialog."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from engine.run.runner import EngineRun
from engine.store.store import read_only_open
from evotui.tui.app import EvoApp
from evotui.tui.backend import Backend, LiveBackend
from evotui.tui.screens.steer import SteerScreen
from evotui.tui.settings import UISettings

LAYER = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 12}, "pipeline": {"mode": "async"}}
TEXT = "Name the separator rule first"


async def until(pilot, predicate, timeout: float = 60.0, msg=lambda: "") -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, f"condition not reached in time {msg()}"
        await pilot.pause(0.05)


def notices(app: EvoApp) -> list[tuple[str, str]]:
    return [(n.message, n.severity) for n in app._notifications]


async def type_text(pilot, text: str) -> None:
    await pilot.press(*["space" if ch == " " else ch for ch in text])


async def test_guidance_from_the_dialog_reaches_the_proposer(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run = await EngineRun.create("rules", [("test", LAYER)], db)
    app = EvoApp(LiveBackend(run), engine=run.run, settings=UISettings())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: bool(run.ctx.seed_id))
        await pilot.press("space")  # paused: the guidance is in force before the next proposals start
        await until(pilot, lambda: run.snapshot().state == "paused")
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, SteerScreen))
        await type_text(pilot, TEXT)
        await pilot.press("tab")
        await pilot.press("3")
        await pilot.press("enter")
        await until(pilot, lambda: any("guidance #1 for 3 proposals" in m for m, _ in notices(app)),
                    msg=lambda: str(notices(app)))
        state = str(app.screen.query_one("#steer-state").render())
        assert "guidance #1 (3 left): Name the separator rule first" in state
        # A refusal: an unknown candidate for a pin is an error notice, nothing written.
        app.screen.query_one("#steer-candidate").value = "a999999"
        await pilot.click("#steer-pin")
        await until(pilot, lambda: any("no candidate 'a999999'" in m and s == "error" for m, s in notices(app)))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SteerScreen))
        await pilot.press("space")
        await until(pilot, lambda: app.engine_worker is not None and app.engine_worker.is_finished, timeout=120)
    con = sqlite3.connect(db)
    rows = con.execute("SELECT act, text, count, by FROM steering WHERE run_id = ? AND act != 'use'",
                       (run.ctx.run_id,)).fetchall()
    uses = con.execute("SELECT count(*) FROM steering WHERE run_id = ? AND act = 'use'", (run.ctx.run_id,)).fetchone()
    con.close()
    assert rows == [("guide", TEXT, 3, "tui")] and uses == (3,)
    store = await read_only_open(db)
    try:
        steered = [c["item_id"] async for c in store.iter_llm_calls(run.ctx.run_id)
                   if c["stage"] == "propose" and f"> {TEXT}" in c["messages"][-1]["content"]]
    finally:
        await store.close()
    assert len(set(steered)) == 3


async def test_pin_from_the_lineage_selection_and_no_dialog_when_read_only(tmp_path) -> None:
    db = tmp_path / "runs.db"
    run = await EngineRun.create("rules", [("test", LAYER)], db)
    app = EvoApp(LiveBackend(run), engine=run.run, settings=UISettings())
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await until(pilot, lambda: len(run.ctx.pool.confirmed()) >= 2)
        await pilot.press("space")
        await until(pilot, lambda: run.snapshot().state == "paused")
        await pilot.press("3")
        await until(pilot, lambda: getattr(app.screen, "selected", lambda: None)() is not None)
        chosen = app.screen.selected().artifact_id  # the lineage screen starts on the best
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, SteerScreen))
        assert app.screen.query_one("#steer-candidate").value == chosen
        await pilot.click("#steer-pin")
        await until(pilot, lambda: any(f"{chosen} pinned as the parent" in m for m, _ in notices(app)),
                    msg=lambda: str(notices(app)))
        assert run.ctx.steering.pin is not None and run.ctx.steering.pin.artifact_id == chosen
        await pilot.press("escape")
        run.stop("test over")
        await until(pilot, lambda: app.engine_worker is not None and app.engine_worker.is_finished, timeout=120)
    con = sqlite3.connect(db)
    assert con.execute("SELECT act, target, by FROM steering WHERE act = 'pin'").fetchall() == [("pin", chosen, "tui")]
    con.close()
    frozen = EvoApp(Backend(), settings=UISettings())
    async with frozen.run_test(size=(80, 24)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        assert not isinstance(frozen.screen, SteerScreen)
