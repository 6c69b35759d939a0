"""EvoApp: the Textual front end over a Backend (a live EngineRun, an attached run, or frozen data).

The engine coroutine runs in an App-level worker, so it survives mode and screen switches and
ends only when the run ends or the user quits (which stops the run; it stays resumable). All
actions are App- or screen-level Bindings with ids (keymap.py); the command palette lists them.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from evotui.tui import textual_fixes  # noqa: F401  (patches a Textual toast hang on import)
from evotui.tui.backend import Backend, BackendError
from evotui.tui.bridge import Sampler
from evotui.tui.keymap import APP_BINDINGS
from evotui.tui.screens.base import ConfirmScreen
from evotui.tui.screens.analysis import AnalysisScreen
from evotui.tui.screens.components import ComponentsScreen
from evotui.tui.screens.dashboard import DashboardScreen
from evotui.tui.screens.help import HelpScreen, InterruptScreen
from evotui.tui.screens.islands import IslandsScreen
from evotui.tui.screens.lineage import LineageScreen
from evotui.tui.screens.review import ReviewScreen
from evotui.tui.screens.steer import SteerScreen, candidate_of
from evotui.tui.settings import UISettings

CONTROL_ACTIONS = {"toggle_pause", "drain", "workers", "toggle_policy", "toggle_gate", "toggle_speculation", "next_stage",
                   "steer"}


class EvoApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "evotui"
    BINDINGS = APP_BINDINGS
    MODES = {"dashboard": DashboardScreen, "review": ReviewScreen, "lineage": LineageScreen, "islands": IslandsScreen,
             "analysis": AnalysisScreen, "components": ComponentsScreen}
    DEFAULT_MODE = "dashboard"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall"), (46, "-huge")]

    def __init__(self, backend: Backend, *, settings: UISettings | None = None,
                 engine: Callable[[], Awaitable[Any]] | None = None, notices: Iterable[str] = (),
                 theme_name: str | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.settings = settings or UISettings()
        self.log_lines = self.settings.log_lines
        self.engine = engine
        self.engine_worker: Worker | None = None
        self.engine_task: asyncio.Task | None = None
        self.result: Any = None
        self.selected_stage = ""
        self.startup_notices = list(notices)
        self.sampler = Sampler(self, backend, self.settings.refresh_hz, self.settings.log_lines)
        self._theme_name = theme_name

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return {"evo-banner": "orange"}

    # -- lifecycle ------------------------------------------------------------------------
    def on_mount(self) -> None:
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        if self._theme_name:
            self.theme = self._theme_name
        for notice in self.startup_notices:
            self.notify(notice, severity="warning", timeout=10)
        if self.engine is not None:
            # The run is a task of its own, shielded from worker cancellation: if the app
            # exits early the launcher stops the run cleanly instead of cancelling it mid-write.
            self.engine_task = asyncio.create_task(self.engine(), name="engine-run")
            self.engine_worker = self.run_worker(self._await_engine(), name="engine", group="engine",
                                                 exit_on_error=False, description="the evolution run")
        self.sampler.start()
        self.call_after_refresh(self.sampler.tick)

    async def _await_engine(self) -> Any:
        assert self.engine_task is not None
        return await asyncio.shield(self.engine_task)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self.engine_worker:
            return
        if event.state == WorkerState.SUCCESS:
            self.result = event.worker.result
            status = getattr(self.result, "status", "finished")
            self.notify(f"Run {status}. Press q to quit.", timeout=15)
        elif event.state == WorkerState.ERROR:
            self.notify(f"The run failed: {event.worker.error!r}", severity="error", timeout=30)
        self.sampler.tick()
        self.refresh_bindings()

    @property
    def engine_running(self) -> bool:
        return self.engine_worker is not None and self.engine_worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    # -- control plumbing -----------------------------------------------------------------
    async def control(self, cmd: str, done: str = "", **args: Any) -> Any:
        """Run one backend command; errors become notifications, never exceptions."""
        try:
            result = await self.backend.control(cmd, **args)
        except BackendError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return None
        if done:
            self.notify(done, timeout=3)
        self.sampler.tick()
        return result

    async def decide(self, item_id: str, decision: str, reason: str = "", edited_text: str | None = None) -> None:
        args: dict[str, Any] = {"item_id": item_id, "decision": decision, "reason": reason}
        if edited_text is not None:
            args["edited_text"] = edited_text
        word = {"approve": "Approved", "reject": "Rejected", "edit": "Edited and approved", "skip": "Skipped"}[decision]
        await self.control("decide", done=f"{word} {item_id}", **args)

    @property
    def can_control(self) -> bool:
        frame = self.sampler.frame
        return self.backend.can_control if frame is None else frame.can_control

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only view does not offer the controls at all (False: hidden from the footer
        and the palette); a finished run shows them disabled (None). The islands screen is offered
        only for a run whose strategy keeps islands, the components screen only for a run of named
        components."""
        if action == "show_islands":
            return self.backend.has_islands
        if action == "show_components":
            return self.backend.has_components
        if action in CONTROL_ACTIONS:
            if not self.can_control:
                return False
            frame = self.sampler.frame
            if frame is not None and frame.finished:
                return None
        return True

    # -- actions --------------------------------------------------------------------------
    async def action_toggle_pause(self) -> None:
        frame = self.sampler.frame
        if frame is None:
            return
        if frame.snap.state == "paused":
            await self.control("resume", done="Resumed")
        else:
            await self.control("pause", done="Paused: running requests finish, nothing new starts")

    def action_drain(self) -> None:
        async def answer(yes: bool | None) -> None:
            if yes:
                await self.control("drain", done="Draining: in-flight work finishes, then the run ends")

        self.push_screen(ConfirmScreen("Drain the run? Nothing new is admitted; in-flight work finishes."), answer)

    async def action_quit(self) -> None:
        if not (self.backend.can_control and self.engine_running):
            self.exit(self.result)
            return

        async def answer(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._stop_and_exit(), name="quit", group="quit", exit_on_error=False)

        self.push_screen(ConfirmScreen("Stop the run and quit? It stays resumable with `evotui resume`."), answer)

    async def _stop_and_exit(self) -> None:
        await self.control("stop", reason="quit from the TUI")
        if self.engine_worker is not None:
            await self.engine_worker.wait()
            self.result = self.engine_worker.result
        self.exit(self.result)

    def action_show(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)
        self.call_after_refresh(self.sampler.tick)

    def action_show_islands(self) -> None:
        if self.backend.has_islands:
            self.action_show("islands")

    def action_show_components(self) -> None:
        if self.backend.has_components:
            self.action_show("components")

    def _stage_names(self) -> list[str]:
        frame = self.sampler.frame
        return [s.name for s in frame.snap.stages] if frame is not None else []

    def action_next_stage(self) -> None:
        names = self._stage_names()
        if not names:
            return
        i = names.index(self.selected_stage) + 1 if self.selected_stage in names else 0
        self.selected_stage = names[i % len(names)]
        self.sampler.tick()

    async def action_workers(self, delta: int) -> None:
        frame = self.sampler.frame
        if frame is None or not frame.snap.stages:
            return
        if not self.selected_stage:
            self.selected_stage = frame.snap.stages[0].name
        stage = next(s for s in frame.snap.stages if s.name == self.selected_stage)
        new = await self.control("set_workers", stage=stage.name, n=max(1, stage.workers + delta))
        if new is not None:
            self.notify(f"{stage.name}: {new} workers", timeout=3)

    async def action_toggle_policy(self) -> None:
        frame = self.sampler.frame
        if frame is not None:
            cycle = {"full": "guarded", "guarded": "reflective", "reflective": "full"}
            policy = cycle.get(frame.snap.policy, "full")
            await self.control("set_policy", done=f"Staleness policy: {policy}", policy=policy)

    async def action_toggle_gate(self, gate: str) -> None:
        frame = self.sampler.frame
        if frame is not None:
            on = not frame.snap.review_gates.get(gate, False)
            where = "evaluation" if gate == "evaluate" else "commit"
            await self.control("set_gate", done=f"Review before {where}: {'on' if on else 'off'}", gate=gate, on=on)

    async def action_toggle_speculation(self) -> None:
        frame = self.sampler.frame
        if frame is not None:
            on = not frame.snap.speculation
            await self.control("set_speculation", done=f"Speculation: {'on' if on else 'off'}", on=on)

    def action_steer(self) -> None:
        if not isinstance(self.screen, SteerScreen):
            self.push_screen(SteerScreen(candidate_of(self.screen, self.backend)))  # evotui/tui/screens/steer.py

    def action_toggle_help(self) -> None:
        if not isinstance(self.screen, (HelpScreen, InterruptScreen)):
            self.push_screen(HelpScreen(self.screen))

    def action_interrupt(self) -> None:
        """Ctrl+C: ask drain / stop / (attached) leave / cancel, never stop without asking."""
        if isinstance(self.screen, InterruptScreen):
            return
        frame = self.sampler.frame
        owns = self.engine is not None
        running = self.engine_running if owns else frame is not None and not frame.finished

        async def answer(choice: str | None) -> None:
            if choice == "drain":
                await self.control("drain", done="Draining: in-flight work finishes, then the run ends")
            elif choice == "stop" and owns:
                self.run_worker(self._stop_and_exit(), name="quit", group="quit", exit_on_error=False)
            elif choice == "stop":
                await self.control("stop", done="Stopped the run (resumable with `evotui resume`)",
                                   reason="stop from an attached TUI")
            elif choice == "leave":
                self.exit(self.result)

        self.push_screen(InterruptScreen(self.backend.can_control, owns, running), answer)

    # -- command palette ------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in APP_BINDINGS:
            if binding.action not in ("toggle_help", "interrupt") and self.check_action(binding.action.split("(")[0], ()):
                yield SystemCommand(binding.tooltip.split(";")[0], f"key {binding.key_display or binding.key}",
                                    lambda a=binding.action: self.run_action(a))
        for binding in getattr(screen, "BINDINGS", []):
            check = getattr(screen, "check_action", None)
            if getattr(binding, "id", None) and (check is None or check(binding.action.split("(")[0], ())):
                yield SystemCommand(binding.tooltip or binding.description, f"key {binding.key_display or binding.key}",
                                    lambda a=binding.action, s=screen: self.run_action(a, s))
