"""Entry points from the CLI: `evotui run/resume TASK` with the UI, and `evotui attach`.

Errors that stop the UI from starting (bad UI config, unknown keymap id, missing or foreign
database, setup errors) go to stderr with exit code 2, before the terminal is taken over.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from engine.runner import SetupError
from evotui import options
from evotui.control import ControlServer, socket_path
from evotui.headless import Terminal, report
from evotui.tui.app import EvoApp
from evotui.tui.attach import AttachBackend, AttachError
from evotui.tui.backend import LiveBackend
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
        _require_terminal("pass --no-ui to run headless")
    except UISettingsError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run_live(args, settings))


async def _run_live(args: argparse.Namespace, settings: UISettings) -> int:
    try:
        run = await options.open_run(args)
    except SetupError as exc:
        print(f"evotui: error: {exc}", file=sys.stderr)
        return exc.exit_code
    control = ControlServer(run, socket_path(run.db_path, run.ctx.run_id))
    notices = [] if await control.start() else [control.problem]
    backend = LiveBackend(run)
    await backend.start()
    app = _make_app(backend, settings, args, notices, engine=run.run)
    term = Terminal(sys.stderr)
    loop = asyncio.get_running_loop()

    def on_hangup() -> None:
        # The terminal is gone (SSH drop, tmux kill-session): finish in-flight work without a UI.
        term.hung_up = True
        run.drain("SIGHUP: the terminal hung up")
        app.exit()

    loop.add_signal_handler(signal.SIGHUP, on_hangup)
    try:
        await app.run_async(mouse=settings.mouse and not args.no_mouse)
    finally:
        task = app.engine_task
        if task is not None and not task.done():
            if not term.hung_up:
                run.stop("the UI closed")
            await asyncio.wait({task}, timeout=None if term.hung_up else 30)
        await control.close()
        loop.remove_signal_handler(signal.SIGHUP)
    result = task.result() if task is not None and task.done() and not task.cancelled() else None
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
