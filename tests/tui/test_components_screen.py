"""The components screen (6): components with their versions and the active one, the diff of a
version against its parent (or the active version), the audit panel, restore and hot-swap after a
confirmation, refusals as error notices and read-only views that refuse to act; on frozen data,
then on a live sepl run of the agent task and on an attach to its stored run."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static, TextArea

from engine.run.runner import EngineRun
from engine.store.store import Store
from evotui.tui.app import EvoApp
from evotui.tui.attach import AttachBackend
from evotui.tui.backend import Backend, BackendError, LiveBackend
from evotui.tui.screens import components as components_screen
from evotui.tui.screens.base import ConfirmScreen, ReasonScreen
from evotui.tui.screens.components import ComponentsScreen, EditComponentScreen
from evotui.tui.settings import UISettings
from evotui.tui.widgets.diffview import DiffView
from tests.tui.fakes import frozen_app
from tests.tui.fakes_components import ComponentsBackend, components_app, frozen_artifacts


async def until(pilot, predicate, timeout: float = 30.0, msg=lambda: "") -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, f"condition not reached in time {msg()}"
        pilot.app.sampler.tick()
        await pilot.pause(0.05)


def messages(app: EvoApp, severity: str | None = None) -> list[str]:
    """Every notification so far (kept by `recorded`: a toast expires after its timeout)."""
    return [m for m, s in app.notified if severity is None or s == severity]  # type: ignore[attr-defined]


def recorded(app: EvoApp) -> EvoApp:
    app.notified = []  # type: ignore[attr-defined]
    notify = app.notify

    def keep(message, *args, **kwargs):
        app.notified.append((str(message), kwargs.get("severity", "information")))  # type: ignore[attr-defined]
        return notify(message, *args, **kwargs)

    app.notify = keep  # type: ignore[method-assign]
    return app


async def opened(pilot) -> ComponentsScreen:
    """Press 6 and wait until the list and the audit rows are in."""
    await pilot.pause()
    await pilot.press("6")
    screen = pilot.app.screen
    assert isinstance(screen, ComponentsScreen)
    await until(pilot, lambda: screen.view is not None and screen.loaded and screen.selected() is not None)
    return screen


def option_ids(screen: ComponentsScreen) -> list[str]:
    options = screen.query_one(OptionList)
    return [options.get_option_at_index(i).id for i in range(options.option_count)]


def option_text(screen: ComponentsScreen, option_id: str) -> str:
    options = screen.query_one(OptionList)
    return str(options.get_option(option_id).prompt)


async def select(pilot, screen: ComponentsScreen, option_id: str) -> None:
    screen._highlight(option_id)
    await pilot.pause()


def audit_panel(screen: ComponentsScreen) -> str:
    return str(screen.query_one("#audit", Static).render())


async def test_lists_components_with_kind_flag_and_versions_newest_first_active_marked():
    app = recorded(components_app(ComponentsBackend(can_control=True)))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await opened(pilot)
        assert option_ids(screen) == [
            "c:system", "v:system@1.2.0", "v:system@1.1.0", "v:system@1.0.0",
            "c:tool_lookup", "v:tool_lookup@1.1.0", "v:tool_lookup@1.0.0",
            "c:round_total", "v:round_total@1.1.0", "v:round_total@1.0.0",
            "c:house", "v:house@1.0.0"]
        assert "prompt · evolvable" in option_text(screen, "c:system")
        assert "tool_code · evolvable · 1 frozen region" in option_text(screen, "c:round_total")
        assert "tool_description · evolvable" in option_text(screen, "c:tool_lookup")
        assert "text · frozen" in option_text(screen, "c:house")
        # The active artifact a000011 carries system@1.2.0 (made in a000008) and round_total@1.1.0.
        assert option_text(screen, "v:system@1.2.0").startswith("★") and "active" in option_text(screen, "v:system@1.2.0")
        assert option_text(screen, "v:round_total@1.1.0").startswith("★")
        assert not option_text(screen, "v:system@1.1.0").startswith("★")
        # The selection starts on the first component's active version.
        assert screen.selected().spec == "system@1.2.0"
        # Every action is in the command palette and the F1 help.
        titles = [c.title for c in app.get_system_commands(screen)]
        for action in ("Restore the selected version", "Hot-swap: edit the selected component", "Diff the selected"):
            assert any(t.startswith(action) for t in titles), titles
        await pilot.press("f1")
        assert type(app.screen).__name__ == "HelpScreen" and app.screen.under is screen


async def test_the_diff_is_against_the_parent_version_and_v_diffs_against_the_active_one():
    app = recorded(components_app())
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await opened(pilot)
        arts = {a.artifact_id: {c.name: c.text for c in a.components} for a in frozen_artifacts()}
        await select(pilot, screen, "v:system@1.1.0")
        diff = screen.query_one(DiffView)
        assert (diff.old, diff.new) == (arts["a000000"]["system"], arts["a000003"]["system"])
        assert diff.caption.startswith("system@1.0.0 -> system@1.1.0")
        await pilot.press("v")
        assert (diff.old, diff.new) == (arts["a000008"]["system"], arts["a000003"]["system"])
        assert diff.caption.startswith("system@1.2.0 (active) -> system@1.1.0")
        await pilot.press("v")
        await select(pilot, screen, "v:system@1.0.0")
        assert diff.old == "" and "the seed's version" in diff.caption
        await pilot.press("m")
        assert diff.mode == "split"


async def test_the_audit_panel_shows_the_transitions_that_made_a_version_and_the_rejected_attempts():
    app = recorded(components_app())
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await opened(pilot)
        await select(pilot, screen, "v:system@1.1.0")
        text = audit_panel(screen)
        assert "Made by i000002" in text
        for transition in ("reflect", "select", "improve", "evaluate", "commit"):
            assert transition in text
        assert "blame: system named in 2 of 3 failing traces" in text and "system@1.1.0" in text
        # i000006 started from a000005 (carrying system@1.1.0) and was rejected: kept, with its reason.
        assert "Not committed from this version (1)" in text and "i000006" in text and "rejected" in text
        assert "minibatch gate 1.0 <= 1.0" in text
        await select(pilot, screen, "v:house@1.0.0")
        assert "the seed's text" in audit_panel(screen)


async def test_a_run_without_audit_rows_says_so():
    app = recorded(components_app(ComponentsBackend(audited=False)))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        assert "no audit rows" in audit_panel(screen) and "sepl" in audit_panel(screen)


async def test_restore_asks_first_then_calls_the_backend_and_the_active_mark_moves():
    backend = ComponentsBackend(can_control=True)
    app = recorded(components_app(backend))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        screen = await opened(pilot)
        await select(pilot, screen, "v:system@1.1.0")
        await pilot.press("r")
        assert isinstance(app.screen, ReasonScreen)
        await pilot.press("escape")
        assert backend.calls == [] and app.screen is screen
        await pilot.press("r")
        await pilot.press(*"bad turn", "enter")
        await until(pilot, lambda: any(m.startswith("Restored system@1.1.0") for m in messages(app)),
                    msg=lambda: messages(app))
        assert backend.calls == [("restore", "a000003", "bad turn")]
        await until(pilot, lambda: option_text(screen, "v:system@1.1.0").startswith("★"))
        assert not option_text(screen, "v:system@1.2.0").startswith("★")
        # The artifact that is active already is not restored again.
        await pilot.press("r")
        assert app.screen is screen and "already" in messages(app, "warning")[-1]


async def test_edit_submits_through_the_backend_after_a_confirmation():
    backend = ComponentsBackend(can_control=True)
    app = recorded(components_app(backend))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        screen = await opened(pilot)
        await select(pilot, screen, "c:tool_lookup")
        await pilot.press("e")
        modal = app.screen
        assert isinstance(modal, EditComponentScreen)
        area = modal.query_one(TextArea)
        assert area.text == "lookup(item) -> the catalogue price of an item, in USD."  # the active text
        area.load_text("lookup(item) -> the price in cents; divide by 100.")
        await pilot.press("tab", *"cents", "enter")  # enter in the reason field submits
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: any(m.startswith("Hot-swapped tool_lookup@1.1.1") for m in messages(app)),
                    msg=lambda: messages(app))
        assert backend.calls == [("edit", "tool_lookup", "lookup(item) -> the price in cents; divide by 100.", "cents")]
        await until(pilot, lambda: "v:tool_lookup@1.1.1" in option_ids(screen))
        assert option_text(screen, "v:tool_lookup@1.1.1").startswith("★")
        # Cancelling the modal or the confirmation changes nothing.
        await pilot.press("e", "escape")
        assert app.screen is screen
        await pilot.press("e", "ctrl+s", "n")
        assert app.screen is screen and len(backend.calls) == 1


async def test_a_refused_edit_is_an_error_notice_and_changes_nothing():
    why = "the new text of 'system' is the text it has: nothing to change"
    backend = ComponentsBackend(can_control=True, refuse=why)
    app = recorded(components_app(backend))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        screen = await opened(pilot)
        before = option_ids(screen)
        await pilot.press("e", "ctrl+s", "y")
        await until(pilot, lambda: why in messages(app, "error"), msg=lambda: messages(app))
        assert option_ids(screen) == before and backend.active_id == "a000011" and not screen.busy
        # A frozen component is refused before any dialog opens.
        await select(pilot, screen, "c:house")
        await pilot.press("e")
        assert app.screen is screen and "frozen" in messages(app, "error")[-1]
        assert len(backend.calls) == 1


async def test_a_read_only_view_does_not_offer_restore_and_edit():
    backend = ComponentsBackend(can_control=False)
    app = recorded(components_app(backend))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await opened(pilot)
        await select(pilot, screen, "v:system@1.1.0")
        for key in ("r", "e"):
            await pilot.press(key)
            assert app.screen is screen
        assert backend.calls == []
        assert "evotui restore" in str(screen.query_one("#audit-box").border_subtitle)
    with pytest.raises(BackendError, match="read-only"):
        await Backend().restore("a000003", "")
    with pytest.raises(BackendError, match="read-only"):
        await Backend().edit_component("system", "x", "")


class CountingBackend(ComponentsBackend):
    reads = 0

    async def audit_rows(self) -> list[dict] | None:
        self.reads += 1
        return await super().audit_rows()


async def test_audit_rows_are_read_again_when_the_pool_moved_at_most_every_few_seconds(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(components_screen, "clock", lambda: now[0])
    backend = CountingBackend()
    app = components_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        assert backend.reads == 1
        backend.snap = replace(backend.snap, pool_version=backend.snap.pool_version + 1)
        app.sampler.tick()
        await pilot.pause()
        assert backend.reads == 1 and screen.retry_timer is not None  # too soon: a timer reads later
        now[0] += components_screen.AUDIT_REFRESH_S
        backend.snap = replace(backend.snap, pool_version=backend.snap.pool_version + 1)
        app.sampler.tick()
        await until(pilot, lambda: backend.reads == 2 and screen.loaded and not screen.loading)
        assert screen.retry_timer is None


async def test_the_screen_is_offered_only_for_a_run_of_named_components():
    app = frozen_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("6")
        assert app.current_mode == "dashboard"
        assert app.check_action("show_components", ()) is False
    app = recorded(components_app())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.check_action("show_components", ()) is True
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert any(t.startswith("Components") for t in titles)


# -- a live sepl run of the agent task, then attach to what it stored -----------------------------
LIVE = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 400}, "pipeline": {"mode": "async"},
        "strategy": {"name": "sepl"}}


async def test_live_sepl_run_restore_and_hot_swap_from_the_screen_then_attach_is_read_only(tmp_path: Path):
    db = tmp_path / "runs.db"
    run = await EngineRun.create("agent_tools", [("test", LIVE)], db)
    run_id = run.ctx.run_id
    app = recorded(EvoApp(LiveBackend(run), engine=run.run, settings=UISettings()))
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        backend = app.backend
        await until(pilot, lambda: (v := backend.components()) is not None
                    and any(len(c.versions) > 1 for c in v.components), timeout=90)
        await pilot.press("space")  # paused: nothing new is admitted, so the run waits for the test
        assert run.snapshot().state == "paused"
        screen = await opened(pilot)
        await until(pilot, lambda: bool(screen.rows) and screen.loaded)
        view = screen.view
        # A version that is not in the active artifact, with the audit rows that made it.
        target = next(cv for c in view.components for cv in c.versions if cv.artifact_id != view.active_id)
        await select(pilot, screen, f"v:{target.spec}")
        await until(pilot, lambda: screen.loaded and target.spec in audit_panel(screen))
        await pilot.press("r")
        await pilot.press(*"from the tui", "enter")
        await until(pilot, lambda: any(m.startswith(f"Restored {target.spec}") for m in messages(app)),
                    msg=lambda: messages(app))
        # Hot-swap the system prompt of the (now) active artifact.
        await select(pilot, screen, "c:system")
        await pilot.press("e")
        edited = app.screen.query_one(TextArea).text + "\nAnswer with the total only."
        app.screen.query_one(TextArea).load_text(edited)
        await pilot.press("ctrl+s", "y")
        await until(pilot, lambda: any(m.startswith("Hot-swapped system@") for m in messages(app))
                    or messages(app, "error"), timeout=90, msg=lambda: messages(app))
        assert not messages(app, "error"), messages(app)
        [swapped] = [a for a in run.ctx.pool.confirmed() if "hot_swap" in a.meta]
        assert swapped.meta["hot_swap"]["by"] == "tui"
        assert next(c.text for c in swapped.components if c.name == "system") == edited.strip()
        # A refusal from the engine (the text it has already) is an error notice.
        await pilot.press("e", "ctrl+s", "y")
        await until(pilot, lambda: messages(app, "error"), timeout=30, msg=lambda: messages(app))
        assert "nothing to change" in messages(app, "error")[-1]
        run.stop("test over")
        await until(pilot, lambda: app.engine_task.done(), timeout=60)
    async with await Store.open(db, create=False, readonly=True) as store:
        events = await store.fetch_rows("pool_events", run_id)
        audit = await store.fetch_rows("audit", run_id)
    restores = [e for e in events if e["kind"] == "restore"]
    assert restores[0]["artifact_id"] == target.artifact_id and restores[0]["detail"]["by"] == "tui"
    assert restores[0]["detail"]["reason"] == "from the tui"
    assert [r["component"] for r in audit if r["transition"] == "hot_swap"] == ["system"]

    # Attached to the stored run without a control socket: the same versions, read-only actions.
    attach = AttachBackend(db, run_id)
    await attach.start()
    try:
        assert not attach.can_control and attach.has_components
        view = attach.components()
        assert view is not None and view.find(target.component, target.version) is not None
        assert await attach.audit_rows()
        with pytest.raises(BackendError, match="read-only"):
            await attach.restore(target.artifact_id, "")
        app = recorded(EvoApp(attach, settings=UISettings()))
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            screen = await opened(pilot)
            await pilot.press("r")  # not offered: no dialog, and the screen says why
            assert app.screen is screen and "read-only" in str(screen.query_one("#audit-box").border_subtitle)
    finally:
        await attach.close()


async def stored(db: Path, run_id: str, table: str) -> list[dict]:
    async with await Store.open(db, create=False, readonly=True) as store:
        return await store.fetch_rows(table, run_id)


async def test_attach_restores_and_hot_swaps_through_the_control_socket(tmp_path: Path):
    from evotui.control import ControlServer, socket_path

    db = tmp_path / "runs.db"
    run = await EngineRun.create("agent_tools", [("test", LIVE)], db)
    server = ControlServer(run, socket_path(db, run.ctx.run_id))
    assert await server.start(), server.problem
    engine = asyncio.create_task(run.run())
    attach = AttachBackend(db, run.ctx.run_id)
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 90
        while not ((v := run.ctx.pool.confirmed()) and len(v) > 1):
            assert loop.time() < end and not engine.done(), "no commit in time"
            await asyncio.sleep(0.05)
        run.pause()  # nothing new is admitted while the test acts
        await attach.start()
        assert attach.can_control

        def older():  # a version whose artifact is not the active one, once the commit is on disk
            view = attach.components()
            return next((cv for c in view.components for cv in c.versions if cv.artifact_id != view.active_id),
                        None) if view is not None else None

        while (target := older()) is None:
            assert loop.time() < end, "the commit never reached the database"
            await asyncio.sleep(0.05)  # attach reads the database once a second
        done = await attach.restore(target.artifact_id, "via the socket")
        assert done["artifact_id"] == target.artifact_id and done["by"] == "control"
        while not any(e["kind"] == "restore" and e["artifact_id"] == target.artifact_id
                      for e in await stored(db, run.ctx.run_id, "pool_events")):
            assert loop.time() < end, "the restore never reached the database"
            await asyncio.sleep(0.05)
        active = attach.components().active("system")
        swapped = await attach.edit_component("system", active.text + "\nBe brief.", "tighter")
        assert swapped["component"] == "system" and swapped["artifact_id"] in run.ctx.pool
        assert [r["component"] for r in await stored(db, run.ctx.run_id, "audit") if r["transition"] == "hot_swap"] \
            == ["system"]  # the reply means the edit is on disk
        with pytest.raises(BackendError, match="frozen"):
            await attach.edit_component("house", "Say anything.", "")
    finally:
        run.stop("test over")
        await engine
        await attach.close()
        await server.close()
