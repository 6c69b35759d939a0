"""Entry points from the CLI: `evotui run/resume TASK` with the UI, and `evotui attach`.

Errors that stop the UI from starting (bad UI config, unknown keymap id, missing or foreign
database, setup errors) go to stderr with exit code 2, before the terminal is taken over.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from engine.run.runner import SetupError
from evotui import options
from evotui.control import ControlServer, socket_path
from evotui.headless import Terminal, report
from evotui.tui.app import EvoApp
from evotui.tui.attach import AttachBackend, AttachError
from evotui.tui import textual_fixes
from evotui.tui.backend import LiveBackend
from evotui.tui.hangup import HangupWatchdog, grace_from_env
from evotui.tui.keymap import binding_ids
from evotui.tui.settings import UISettings, UISettingsError, check_keymap, load_ui_settings
from evotui.tui.themes import FALLBACK, load_themes


class NoTerminal(UISettingsError):
    pass


def _require_terminal(hint: str) -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise NoTerminal(f"the terminal UI needs a terminal on stdin and stdout; {hint}")


def _settings(args: argparse.Namespace) -> UISettings:
    settings = load_ui_settings(getattr(args, "ui_config", None))
    check_keymap(settings.keymap, binding_ids())
    return settings


def prepare(app: EvoApp, requested: str | None, notices: list[str]) -> str:
    """Register the theme files; returns the theme to use, adding a notice for any problem."""
    themes, problems = load_themes()
    notices.extend(problems)
    for theme in themes:
        app.register_theme(theme)
    name = requested or app.settings.theme
    if name in app.available_themes:
        return name
    fallback = FALLBACK if FALLBACK in app.available_themes else "textual-dark"
    notices.append(f"unknown theme {name!r}; using {fallback}. Themes: {', '.join(sorted(app.available_themes))}")
    return fallback


def _make_app(backend, settings: UISettings, args: argparse.Namespace, notices: list[str], engine=None) -> EvoApp:
    app = EvoApp(backend, settings=settings, engine=engine, notices=notices)
    app._theme_name = prepare(app, getattr(args, "theme", None), app.startup_notices)
    return app


def run_tui(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
        hangup_grace_s = grace_from_env(os.environ)
        _require_terminal("pass --no-ui to run headless")
    except (UISettingsError, ValueError) as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run_live(args, settings, hangup_grace_s))


async def _run_live(args: argparse.Namespace, settings: UISettings, hangup_grace_s: float) -> int:
    try:
        run = await options.open_run(args)
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    serving = await control.start()
    notices = [] if serving else [control.problem]
    backend = LiveBackend(run)
    await backend.start()
    app = _make_app(backend, settings, args, notices, engine=run.run)
    term = Terminal(sys.stderr)
    loop = asyncio.get_running_loop()
    watchdog = HangupWatchdog(run, control.path if serving else None, hangup_grace_s, loop)

    def on_hangup(reason: str) -> None:
        # The terminal is gone (SSH drop, tmux kill-session): finish in-flight work without a UI.
        if term.hung_up:
            return
        term.hung_up = True
        run.drain(reason)
        app.exit()

    def terminal_lost(reason: str) -> None:
        """From the SIGHUP handler or Textual's writer thread. The watchdog starts here, not on the
        loop: a loop blocked on the dead terminal would never run a callback."""
        watchdog.start()
        try:
            loop.call_soon_threadsafe(on_hangup, reason)
        except RuntimeError:
            pass  # the loop has closed; the watchdog bounds what is left of the exit

    # signal.signal, not loop.add_signal_handler: its handler runs even while the loop is blocked.
    previous = signal.signal(signal.SIGHUP, lambda *_: terminal_lost("SIGHUP: the terminal hung up"))
    textual_fixes.terminal_lost = lambda: terminal_lost("the terminal was lost (a write to it failed)")
    try:
        await app.run_async(mouse=settings.mouse and not args.no_mouse)
    finally:
        task = app.engine_task
        if task is not None and not task.done():
            if not term.hung_up:
                run.stop("the UI closed")
            await asyncio.wait({task}, timeout=None if term.hung_up else 30)
        await control.close()
        textual_fixes.terminal_lost = None
        # After a hang-up a repeated SIGHUP must not kill the process before it reports its exit.
        signal.signal(signal.SIGHUP, signal.SIG_IGN if watchdog.thread is not None else previous)
    result = task.result() if task is not None and task.done() and not task.cancelled() else None
    if watchdog.thread is not None:
        watchdog.run_ended(result.exit_code if result is not None else 1)
    if result is None:
        term.say("evotui: the run did not finish cleanly; check `evotui show` and resume it")
        return 1
    report(term, run, result, f"evotui resume {result.summary['run_id']} --db {args.db}")
    return result.exit_code


def run_attach(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except UISettingsError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_attach(args, settings))


async def _attach(args: argparse.Namespace, settings: UISettings) -> int:
    backend = AttachBackend(args.db, args.run_id)
    try:
        await backend.start()
    except AttachError as exc:
        print(f"evotui: error: cannot attach: {exc}", file=sys.stderr)
        return 2
    try:
        _require_terminal("use `evotui show` for a summary without one")
    except NoTerminal as exc:
        await backend.close()
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    notices = [backend.problem] if backend.problem else []
    app = _make_app(backend, settings, args, notices)
    try:
        await app.run_async(mouse=settings.mouse and not args.no_mouse)
    finally:
        await backend.close()
    return 0
