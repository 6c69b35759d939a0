"""Bad input gets clear messages; attach reads the database live and controls through the socket."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.run.runner import EngineRun
from evotui.control import ControlServer, socket_path
from evotui.tui.attach import AttachBackend
from evotui.tui.keymap import binding_ids
from evotui.tui.settings import UISettingsError, check_keymap, load_ui_settings
from evotui.tui.themes import THEMES_DIR, load_themes, parse_theme
from tests.tui.fakes import FrozenBackend
from evotui.tui.app import EvoApp
from evotui.tui.launch import prepare

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evotui.cli", *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_shipped_themes_are_valid():
    themes, problems = load_themes(THEMES_DIR)
    assert problems == []
    assert {"evotui-dark", "evotui-light", "evotui-256"} <= {t.name for t in themes}


def test_bad_theme_file_is_named(tmp_path):
    (tmp_path / "bad.toml").write_text('name = "x"\nprimary = "not-a-colour"\n')
    with pytest.raises(ValueError, match="bad.toml: primary = 'not-a-colour' is not a colour"):
        parse_theme(tmp_path / "bad.toml")
    _, problems = load_themes(tmp_path)
    assert len(problems) == 1


def test_unknown_theme_falls_back_with_a_notice():
    app = EvoApp(FrozenBackend())
    notices: list[str] = []
    assert prepare(app, "no-such-theme", notices) == "evotui-dark"
    assert "unknown theme 'no-such-theme'" in notices[0]


def test_ui_config_refuses_unknown_keys_and_keymap_ids(tmp_path):
    bad = tmp_path / "ui.toml"
    bad.write_text('colour = "red"\n')
    with pytest.raises(UISettingsError, match="colour"):
        load_ui_settings(bad)
    good = tmp_path / "ok.toml"
    good.write_text('theme = "evotui-256"\n[keymap]\npause = "P"\n')
    settings = load_ui_settings(good)
    check_keymap(settings.keymap, binding_ids())
    with pytest.raises(UISettingsError, match="unknown keymap binding id.*paws"):
        check_keymap({"paws": "p"}, binding_ids())


def test_cli_reports_bad_keymap_before_taking_the_terminal(tmp_path):
    ui = tmp_path / "ui.toml"
    ui.write_text('[keymap]\nnope = "z"\n')
    proc = cli("attach", "--db", str(tmp_path / "x.db"), "--ui-config", str(ui))
    assert proc.returncode == 2 and "unknown keymap binding id(s) nope" in proc.stderr


def test_attach_to_missing_or_foreign_database(tmp_path):
    proc = cli("attach", "--db", str(tmp_path / "missing.db"))
    assert proc.returncode == 2 and "cannot attach: no database at" in proc.stderr
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    proc = cli("attach", "--db", str(foreign))
    assert proc.returncode == 2 and "cannot attach" in proc.stderr


async def test_attach_controls_a_run_through_its_socket(tmp_path):
    db = tmp_path / "r.db"
    layer = {"sim": {"time_scale": 400}, "budget": {"max_proposals": 40}, "pipeline": {"review_before_evaluate": True}}
    run = await EngineRun.create("rules", [("t", layer)], db)
    server = ControlServer(run, socket_path(db, run.ctx.run_id))
    assert await server.start()
    task = asyncio.create_task(run.run())
    attach = AttachBackend(db, None)
    try:
        for _ in range(200):
            if run.review.pending():
                break
            await asyncio.sleep(0.05)
        await attach.start()
        assert attach.can_control and attach.run_id == run.ctx.run_id
        await attach.control("pause")
        assert run.snapshot().state == "paused"
        await attach.control("resume")
        item = attach.pending()[0].item_id
        await attach.control("decide", item_id=item, decision="reject", reason="via attach")
        assert item not in {p.item_id for p in run.review.pending()}
        frame = attach.frame()
        assert frame is not None and frame.can_control and frame.snap.stages
    finally:
        run.stop("test over")
        await task
        await server.close()
        await attach._refresh()
        assert any(a.status == "seed" for a in attach.artifacts())
        assert attach.frame().finished == "interrupted"
        await attach.close()
    assert not socket_path(db, run.ctx.run_id).exists()
