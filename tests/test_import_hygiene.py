"""The engine and the headless front end never import textual (checked in a subprocess).

rich cannot be checked the same way: httpx's package __init__ imports its optional CLI, which
loads rich whenever rich is installed (textual installs it). Our own modules must not import it,
which the static check below enforces.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, sys, pkgutil, importlib
import engine
for mod in pkgutil.walk_packages(engine.__path__, "engine."):
    importlib.import_module(mod.name)
import evotui.cli, evotui.headless, evotui.bench, evotui.commands.inspect
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "textual")))
"""


def test_engine_and_headless_never_import_textual():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_no_ui_run_never_imports_textual(tmp_path):
    probe = (
        "import sys, json\n"
        "from evotui.cli import main\n"
        f"code = main(['run', 'rules', '--no-ui', '--quiet', '--db', r'{tmp_path / 'r.db'}', '--max-proposals', '2', '--time-scale', '2000'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'textual')\n"
        "print(json.dumps({'code': code, 'bad': bad}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "bad": []}, out.stderr[-2000:]


def test_engine_sources_never_import_textual_or_rich():
    import re

    pattern = re.compile(r"^\s*(from|import)\s+(textual|rich)\b", re.M)
    offenders = [str(p) for p in (ROOT / "engine").rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
